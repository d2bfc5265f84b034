//! The embedded server end to end without a socket: arbitrary bytes go
//! through the connection's framing into every command (parse and apply)
//! against a fresh in-memory node, then time passes (delays, retries,
//! TTLs run). Nothing may panic, hang or allocate without bound.
//!
//! Input: one byte choosing the read sizes, then the connection's input.
#![no_main]

use ezmq_disque_server::fuzzing::FuzzServer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let mut server = FuzzServer::new();
    let chunks = if split == 0 {
        Vec::new()
    } else {
        vec![usize::from(split)]
    };
    server.feed(stream, &chunks);
    server.advance(u64::from(split) * 60);
    server.advance(400 * 24 * 3600);
});
