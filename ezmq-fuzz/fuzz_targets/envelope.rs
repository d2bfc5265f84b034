//! The request-reply envelope: the headers of a request and the bytes of
//! a reply, both from the network. Decoding must never panic, and what
//! decodes must encode back to the same values.
#![no_main]

use arbitrary::Arbitrary;
use bytes::Bytes;
use ezmq_core::Headers;
use ezmq_request_reply::fuzzing::{decode_reply, decode_request, encode_reply, request_headers};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Input {
    /// A request's headers: the three the decoder reads, then others.
    Request {
        correlation_id: Option<String>,
        reply_to: Option<String>,
        deadline_ms: Option<String>,
        other: Vec<(String, String)>,
    },
    /// A reply's bytes.
    Reply(Vec<u8>),
}

fuzz_target!(|input: Input| match input {
    Input::Request {
        correlation_id,
        reply_to,
        deadline_ms,
        other,
    } => {
        let mut headers: Headers = other.into_iter().collect();
        for (name, value) in [
            ("correlation-id", correlation_id),
            ("reply-to", reply_to),
            ("deadline-ms", deadline_ms),
        ] {
            if let Some(value) = value {
                headers.insert(name, value);
            }
        }
        if let Ok((id, reply_to, deadline)) = decode_request(&headers) {
            let again = decode_request(&request_headers(id, &reply_to, deadline));
            assert_eq!(again.ok(), Some((id, reply_to, deadline)));
        }
    }
    Input::Reply(bytes) => {
        if let Ok((id, outcome)) = decode_reply(&Bytes::from(bytes)) {
            let encoded = encode_reply(id, outcome.clone()).expect("a reply encodes");
            let again = decode_reply(&encoded).expect("an encoded reply decodes");
            assert_eq!(again, (id, outcome));
        }
    }
});
