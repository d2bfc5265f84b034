//! The wire format of requests and replies.
//!
//! A **request** is an ordinary message on the request topic: the caller's
//! body, unchanged, plus three headers (names without the reserved `ezmq-`
//! prefix, so any backend carries them like user headers):
//!
//! | Header | Value |
//! |---|---|
//! | `correlation-id` | a UUID v4 pairing the request with its reply |
//! | `reply-to` | the caller's inbox address, opaque (the backend's [`ReplyChannel`](ezmq_core::spi::ReplyChannel) made it) |
//! | `deadline-ms` | the caller's deadline, milliseconds since the Unix epoch |
//!
//! A **reply** goes to the inbox as bytes: one line of JSON (the header), a
//! `\n`, then the body's raw bytes, unchanged (binary safe, no base64):
//!
//! ```text
//! {"v":1,"id":"<uuid>","ok":true}\n<reply body>
//! {"v":1,"id":"<uuid>","ok":false}\n<error message, UTF-8>
//! ```
//!
//! JSON never contains a raw newline (it is escaped inside strings), so the
//! first `\n` always ends the header. `v` is the format version: a decoder
//! rejects versions it does not know instead of guessing, and ignores
//! header fields it does not know (so fields can be added within a
//! version).

use bytes::{BufMut, Bytes, BytesMut};
use ezmq_core::Headers;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The format version this crate writes and reads.
pub(crate) const VERSION: u64 = 1;

/// Longest header a decoder looks at before giving up.
pub(crate) const MAX_HEADER_LEN: usize = 1024;

/// Longest reply address a worker accepts.
pub(crate) const MAX_ADDRESS_LEN: usize = 512;

/// Request header: the correlation id.
pub(crate) const CORRELATION_ID_HEADER: &str = "correlation-id";

/// Request header: the caller's inbox address.
pub(crate) const REPLY_TO_HEADER: &str = "reply-to";

/// Request header: the caller's deadline in Unix milliseconds.
pub(crate) const DEADLINE_HEADER: &str = "deadline-ms";

/// Why a message could not be decoded as a request or a reply.
///
/// A malformed request is a permanent failure for the worker's listener
/// (there is no trustworthy inbox to answer to); a malformed reply is
/// logged and dropped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// The reply does not start with a JSON header.
    #[error("not an ezmq request-reply message (no JSON header)")]
    NotAnEnvelope,
    /// No `\n` ends the reply header within the first 1024 bytes.
    #[error("the request-reply header has no end of line within {MAX_HEADER_LEN} bytes")]
    UnterminatedHeader,
    /// The reply header is not the expected JSON object.
    #[error("malformed request-reply header: {0}")]
    BadHeader(#[source] serde_json::Error),
    /// The reply header announces a format version this crate does not
    /// know.
    #[error("unsupported request-reply format version {0}")]
    UnsupportedVersion(u64),
    /// A field (of a reply) or a header (of a request) is absent.
    #[error("request-reply message lacks `{0}`")]
    MissingField(&'static str),
    /// The correlation id is not a UUID.
    #[error("invalid correlation id {0:?}")]
    BadCorrelationId(String),
    /// The deadline is not a number of milliseconds.
    #[error("invalid deadline {0:?} (expected Unix milliseconds)")]
    BadDeadline(String),
    /// The reply address is empty or too long.
    #[error("invalid reply address of {0} bytes")]
    BadReplyTo(usize),
}

/// A decoded request (its body stays in the job).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RequestEnvelope {
    pub(crate) id: Uuid,
    pub(crate) reply_to: String,
    pub(crate) deadline_ms: u64,
}

/// What a reply carries.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The handler's answer.
    Ok(Bytes),
    /// The handler's error message.
    Err(String),
}

/// A decoded reply.
#[derive(Debug)]
pub(crate) struct ReplyEnvelope {
    pub(crate) id: Uuid,
    pub(crate) outcome: Outcome,
}

#[derive(Serialize)]
struct ReplyHeaderOut<'a> {
    v: u64,
    id: &'a str,
    ok: bool,
}

/// Every header field a reply may have. Unknown fields are ignored.
#[derive(Deserialize)]
struct HeaderIn {
    v: u64,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    ok: Option<bool>,
}

/// The headers of a request.
pub(crate) fn request_headers(id: Uuid, reply_to: &str, deadline_ms: u64) -> Headers {
    [
        (CORRELATION_ID_HEADER, id.hyphenated().to_string()),
        (REPLY_TO_HEADER, reply_to.to_owned()),
        (DEADLINE_HEADER, deadline_ms.to_string()),
    ]
    .into_iter()
    .collect()
}

/// Decodes the headers of a request.
pub(crate) fn decode_request(headers: &Headers) -> Result<RequestEnvelope, EnvelopeError> {
    let id = parse_id(headers.get(CORRELATION_ID_HEADER).map(str::to_owned))?;
    let reply_to = headers
        .get(REPLY_TO_HEADER)
        .ok_or(EnvelopeError::MissingField(REPLY_TO_HEADER))?;
    if reply_to.is_empty() || reply_to.len() > MAX_ADDRESS_LEN {
        return Err(EnvelopeError::BadReplyTo(reply_to.len()));
    }
    let deadline = headers
        .get(DEADLINE_HEADER)
        .ok_or(EnvelopeError::MissingField(DEADLINE_HEADER))?;
    let deadline_ms = deadline
        .parse()
        .map_err(|_| EnvelopeError::BadDeadline(deadline.to_owned()))?;
    Ok(RequestEnvelope {
        id,
        reply_to: reply_to.to_owned(),
        deadline_ms,
    })
}

fn with_header<H: Serialize>(header: &H, body: &[u8]) -> Result<Bytes, serde_json::Error> {
    let header = serde_json::to_vec(header)?;
    let mut buf = BytesMut::with_capacity(header.len() + 1 + body.len());
    buf.put_slice(&header);
    buf.put_u8(b'\n');
    buf.put_slice(body);
    Ok(buf.freeze())
}

/// Encodes a reply.
pub(crate) fn encode_reply(id: Uuid, outcome: &Outcome) -> Result<Bytes, serde_json::Error> {
    let id = id.hyphenated().to_string();
    let (ok, body) = match outcome {
        Outcome::Ok(body) => (true, body.as_ref()),
        Outcome::Err(message) => (false, message.as_bytes()),
    };
    with_header(
        &ReplyHeaderOut {
            v: VERSION,
            id: &id,
            ok,
        },
        body,
    )
}

/// Splits a message into its parsed header and its body (zero-copy).
fn split(msg: &Bytes) -> Result<(HeaderIn, Bytes), EnvelopeError> {
    if msg.first() != Some(&b'{') {
        return Err(EnvelopeError::NotAnEnvelope);
    }
    let window = &msg[..msg.len().min(MAX_HEADER_LEN + 1)];
    let end = window
        .iter()
        .position(|&b| b == b'\n')
        .ok_or(EnvelopeError::UnterminatedHeader)?;
    let header: HeaderIn = serde_json::from_slice(&msg[..end]).map_err(EnvelopeError::BadHeader)?;
    if header.v != VERSION {
        return Err(EnvelopeError::UnsupportedVersion(header.v));
    }
    Ok((header, msg.slice(end + 1..)))
}

fn parse_id(id: Option<String>) -> Result<Uuid, EnvelopeError> {
    let id = id.ok_or(EnvelopeError::MissingField("id"))?;
    Uuid::try_parse(&id).map_err(|_| EnvelopeError::BadCorrelationId(id))
}

/// Decodes a reply.
pub(crate) fn decode_reply(msg: &Bytes) -> Result<ReplyEnvelope, EnvelopeError> {
    let (header, body) = split(msg)?;
    let id = parse_id(header.id)?;
    let ok = header.ok.ok_or(EnvelopeError::MissingField("ok"))?;
    let outcome = if ok {
        Outcome::Ok(body)
    } else {
        Outcome::Err(String::from_utf8_lossy(&body).into_owned())
    };
    Ok(ReplyEnvelope { id, outcome })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance() -> Uuid {
        Uuid::new_v4()
    }

    #[test]
    fn request_headers_round_trip() {
        let id = instance();
        let headers = request_headers(id, "__ezmq|reply|abc", 1_767_225_600_123);
        assert_eq!(headers.get("correlation-id"), Some(id.to_string().as_str()));
        let env = decode_request(&headers).unwrap();
        assert_eq!(
            env,
            RequestEnvelope {
                id,
                reply_to: "__ezmq|reply|abc".into(),
                deadline_ms: 1_767_225_600_123,
            }
        );
        // The names pass PushOptions' validation (no reserved prefix).
        let options = ezmq_core::PushOptions::new().with_headers(headers);
        assert!(options.validate().is_ok());
    }

    #[test]
    fn malformed_requests_give_clear_errors() {
        let id = instance();
        let full = request_headers(id, "inbox", 5);
        let without = |name: &str| {
            let mut h = full.clone();
            h.remove(name);
            decode_request(&h).unwrap_err()
        };
        assert!(matches!(
            without("correlation-id"),
            EnvelopeError::MissingField("id")
        ));
        assert!(matches!(
            without("reply-to"),
            EnvelopeError::MissingField("reply-to")
        ));
        assert!(matches!(
            without("deadline-ms"),
            EnvelopeError::MissingField("deadline-ms")
        ));
        let with = |name: &str, value: &str| {
            let mut h = full.clone();
            h.insert(name, value);
            decode_request(&h).unwrap_err()
        };
        assert!(matches!(
            with("correlation-id", "nope"),
            EnvelopeError::BadCorrelationId(_)
        ));
        assert!(matches!(
            with("deadline-ms", "soon"),
            EnvelopeError::BadDeadline(_)
        ));
        assert!(matches!(with("reply-to", ""), EnvelopeError::BadReplyTo(0)));
        assert!(matches!(
            with("reply-to", &"x".repeat(MAX_ADDRESS_LEN + 1)),
            EnvelopeError::BadReplyTo(_)
        ));
        assert_eq!(
            with("deadline-ms", "soon").to_string(),
            "invalid deadline \"soon\" (expected Unix milliseconds)"
        );
    }

    #[test]
    fn reply_round_trip() {
        let id = instance();
        let ok = encode_reply(id, &Outcome::Ok(Bytes::from_static(b"\x00\xffhi\n"))).unwrap();
        let env = decode_reply(&ok).unwrap();
        assert_eq!(env.id, id);
        assert_eq!(
            env.outcome,
            Outcome::Ok(Bytes::from_static(b"\x00\xffhi\n"))
        );

        let err = encode_reply(id, &Outcome::Err("boom: \"quoted\"\nline".into())).unwrap();
        assert_eq!(
            decode_reply(&err).unwrap().outcome,
            Outcome::Err("boom: \"quoted\"\nline".into())
        );
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let id = instance();
        let msg = Bytes::from(format!(
            "{{\"v\":1,\"id\":\"{id}\",\"ok\":true,\"future\":[1,2]}}\nx"
        ));
        assert_eq!(decode_reply(&msg).unwrap().outcome, Outcome::Ok("x".into()));
    }

    #[test]
    fn reply_wire_format_is_stable() {
        let id = Uuid::try_parse("67e55044-10b1-426f-9247-bb680e5fe0c8").unwrap();
        let msg = encode_reply(id, &Outcome::Ok(Bytes::from_static(b"r"))).unwrap();
        assert_eq!(
            &msg[..],
            &b"{\"v\":1,\"id\":\"67e55044-10b1-426f-9247-bb680e5fe0c8\",\"ok\":true}\nr"[..]
        );
        let empty = encode_reply(id, &Outcome::Ok(Bytes::new())).unwrap();
        assert_eq!(
            decode_reply(&empty).unwrap().outcome,
            Outcome::Ok(Bytes::new())
        );
    }

    #[test]
    fn malformed_replies_give_clear_errors() {
        let err = |msg: &[u8]| decode_reply(&Bytes::copy_from_slice(msg)).unwrap_err();
        assert!(matches!(err(b""), EnvelopeError::NotAnEnvelope));
        assert!(matches!(err(b"hello"), EnvelopeError::NotAnEnvelope));
        assert!(matches!(
            err(b"{\"v\":1"),
            EnvelopeError::UnterminatedHeader
        ));
        let long = [b"{".as_slice(), &[b' '; 2000], b"}\n"].concat();
        assert!(matches!(err(&long), EnvelopeError::UnterminatedHeader));
        assert!(matches!(err(b"{oops}\n"), EnvelopeError::BadHeader(_)));
        assert!(matches!(err(b"{}\n"), EnvelopeError::BadHeader(_)));
        assert!(matches!(
            err(b"{\"v\":2,\"id\":\"x\"}\nbody"),
            EnvelopeError::UnsupportedVersion(2)
        ));
        assert!(matches!(
            err(b"{\"v\":1}\n"),
            EnvelopeError::MissingField("id")
        ));
        assert!(matches!(
            err(b"{\"v\":1,\"id\":\"not-a-uuid\"}\n"),
            EnvelopeError::BadCorrelationId(_)
        ));
        let id = instance();
        let no_ok = format!("{{\"v\":1,\"id\":\"{id}\"}}\n");
        assert!(matches!(
            err(no_ok.as_bytes()),
            EnvelopeError::MissingField("ok")
        ));
        assert_eq!(
            err(b"{\"v\":9}\n").to_string(),
            "unsupported request-reply format version 9"
        );
    }

    #[test]
    fn non_utf8_error_message_does_not_panic() {
        let id = instance();
        let mut msg = format!("{{\"v\":1,\"id\":\"{id}\",\"ok\":false}}\n").into_bytes();
        msg.extend_from_slice(&[0xff, 0xfe, b'x']);
        match decode_reply(&Bytes::from(msg)).unwrap().outcome {
            Outcome::Err(m) => assert!(m.ends_with('x')),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn arbitrary_prefixes_never_panic() {
        let id = instance();
        let full = encode_reply(id, &Outcome::Ok(Bytes::from_static(b"payload"))).unwrap();
        for n in 0..full.len() {
            let _ = decode_reply(&full.slice(..n));
        }
    }
}
