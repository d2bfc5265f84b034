//! The embedded server's request framing (RESP multibulk and inline
//! requests): arbitrary bytes must never panic, and the requests found
//! must not depend on how the bytes were split into reads.
//!
//! Input: one byte choosing the read sizes, then the stream.
#![no_main]

use ezmq_disque_server::fuzzing::{encode_request, parse_frames, parse_frames_chunked};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let whole = parse_frames(stream);
    let chunks = [usize::from(split % 17) + 1, usize::from(split / 17) + 1];
    let pieces = parse_frames_chunked(stream, &chunks, true);
    assert_eq!(
        whole.commands, pieces.commands,
        "requests depend on read sizes"
    );
    assert_eq!(
        whole.error.is_some(),
        pieces.error.is_some(),
        "{whole:?} vs {pieces:?}"
    );
    if whole.error.is_none() {
        assert_eq!(whole.rest, pieces.rest);
    }
    // Every request a client library would send for these arguments
    // parses back to the same arguments.
    for args in &whole.commands {
        if args.is_empty() {
            continue;
        }
        let again = parse_frames(&encode_request(args));
        assert_eq!(again.error, None);
        assert_eq!(again.rest, 0);
        assert_eq!(&again.commands, &[args.clone()]);
    }
    // Before AUTH the limits are smaller; it must not panic either, and
    // it accepts no more than an authenticated client does.
    let unauthed = parse_frames_chunked(stream, &chunks, false);
    assert!(unauthed.commands.len() <= whole.commands.len());
    assert_eq!(
        unauthed.commands[..],
        whole.commands[..unauthed.commands.len()]
    );
});
