//! Entry points for the coverage-guided fuzz targets in `ezmq-fuzz/`.
//!
//! Not part of the supported API (hidden from the docs): it exposes the
//! private envelope codec so a fuzzer can feed it arbitrary input.

use crate::envelope::{self, Outcome};
use bytes::Bytes;
use ezmq_core::Headers;
use uuid::Uuid;

pub use crate::envelope::EnvelopeError;

/// A decoded request envelope: correlation id, reply address, deadline
/// (Unix milliseconds).
pub type Request = (Uuid, String, u64);

/// A decoded reply: correlation id, then the handler's answer or its
/// error message.
pub type Reply = (Uuid, Result<Bytes, String>);

/// Decodes the headers of a request, as a reply listener does.
pub fn decode_request(headers: &Headers) -> Result<Request, EnvelopeError> {
    envelope::decode_request(headers).map(|r| (r.id, r.reply_to, r.deadline_ms))
}

/// The headers a caller puts on a request.
pub fn request_headers(id: Uuid, reply_to: &str, deadline_ms: u64) -> Headers {
    envelope::request_headers(id, reply_to, deadline_ms)
}

/// Decodes a reply message, as a caller's inbox receiver does.
pub fn decode_reply(msg: &Bytes) -> Result<Reply, EnvelopeError> {
    envelope::decode_reply(msg).map(|r| {
        let outcome = match r.outcome {
            Outcome::Ok(body) => Ok(body),
            Outcome::Err(message) => Err(message),
        };
        (r.id, outcome)
    })
}

/// Encodes a reply, as a worker does.
pub fn encode_reply(id: Uuid, outcome: Result<Bytes, String>) -> Result<Bytes, serde_json::Error> {
    let outcome = match outcome {
        Ok(body) => Outcome::Ok(body),
        Err(message) => Outcome::Err(message),
    };
    envelope::encode_reply(id, &outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let id = Uuid::new_v4();
        let h = request_headers(id, "inbox", 7);
        assert_eq!(decode_request(&h).ok(), Some((id, "inbox".to_owned(), 7)));
        let msg = encode_reply(id, Err("boom".into())).unwrap();
        assert_eq!(decode_reply(&msg).ok(), Some((id, Err("boom".to_owned()))));
    }
}
