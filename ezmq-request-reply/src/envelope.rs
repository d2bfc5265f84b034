//! The wire format of requests and replies.
//!
//! Every message is one line of JSON (the header), a `\n`, then the body's
//! raw bytes, unchanged (binary safe, no base64):
//!
//! ```text
//! {"v":1,"id":"<uuid>","reply_to":"__ezmq|reply|<uuid>","deadline_ms":1767225600000}\n<request body>
//! {"v":1,"id":"<uuid>","ok":true}\n<reply body>
//! {"v":1,"id":"<uuid>","ok":false}\n<error message, UTF-8>
//! ```
//!
//! JSON never contains a raw newline (it is escaped inside strings), so the
//! first `\n` always ends the header. `v` is the format version: a decoder
//! rejects versions it does not know instead of guessing, and ignores
//! header fields it does not know (so fields can be added within a
//! version). `deadline_ms` is the caller's deadline in milliseconds since
//! the Unix epoch.

use std::fmt::Write as _;

use bytes::{BufMut, Bytes, BytesMut};
use ezmq_core::{Topic, INTERNAL_PREFIX, INTERNAL_SEPARATOR};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The format version this crate writes and reads.
pub(crate) const VERSION: u64 = 1;

/// Longest header a decoder looks at before giving up.
pub(crate) const MAX_HEADER_LEN: usize = 1024;

/// The kind part of reply queue names (`__ezmq|reply|<uuid>`).
const REPLY_KIND: &str = "reply";

/// Why a message could not be decoded as a request or a reply.
///
/// A malformed request is a permanent failure for the worker's listener (it
/// goes to the dead-letter topic, since there is no trustworthy queue to
/// answer to); a malformed reply is logged and dropped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// The message does not start with a JSON header.
    #[error("not an ezmq request-reply message (no JSON header)")]
    NotAnEnvelope,
    /// No `\n` ends the header within the first 1024 bytes.
    #[error("the request-reply header has no end of line within {MAX_HEADER_LEN} bytes")]
    UnterminatedHeader,
    /// The header is not the expected JSON object.
    #[error("malformed request-reply header: {0}")]
    BadHeader(#[source] serde_json::Error),
    /// The header announces a format version this crate does not know.
    #[error("unsupported request-reply format version {0}")]
    UnsupportedVersion(u64),
    /// A field the message kind needs is absent.
    #[error("request-reply header lacks the field `{0}`")]
    MissingField(&'static str),
    /// The correlation id is not a UUID.
    #[error("invalid correlation id {0:?}")]
    BadCorrelationId(String),
    /// The reply queue is not an ezmq reply queue (a worker only answers to
    /// `__ezmq|reply|<uuid>` queues).
    #[error("invalid reply queue {0:?}")]
    BadReplyTo(String),
}

/// A decoded request.
#[derive(Debug)]
pub(crate) struct RequestEnvelope {
    pub(crate) id: Uuid,
    pub(crate) reply_to: Topic,
    pub(crate) deadline_ms: u64,
    pub(crate) body: Bytes,
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
struct RequestHeaderOut<'a> {
    v: u64,
    id: &'a str,
    reply_to: &'a str,
    deadline_ms: u64,
}

#[derive(Serialize)]
struct ReplyHeaderOut<'a> {
    v: u64,
    id: &'a str,
    ok: bool,
}

/// Every header field any kind uses; which ones are required depends on
/// the kind. Unknown fields are ignored.
#[derive(Deserialize)]
struct HeaderIn {
    v: u64,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    reply_to: Option<String>,
    #[serde(default)]
    deadline_ms: Option<u64>,
    #[serde(default)]
    ok: Option<bool>,
}

/// The reply queue of the client instance `instance`.
pub(crate) fn reply_topic(instance: Uuid) -> Topic {
    let mut name = String::with_capacity(INTERNAL_PREFIX.len() + REPLY_KIND.len() + 38);
    name.push_str(INTERNAL_PREFIX);
    name.push(INTERNAL_SEPARATOR);
    name.push_str(REPLY_KIND);
    name.push(INTERNAL_SEPARATOR);
    // Writing to a String cannot fail.
    let _ = write!(name, "{}", instance.hyphenated());
    // The name is valid by construction (see the unit test against
    // `Topic::internal`), so it need not be validated again.
    Topic::from_broker(name)
}

/// Accepts only `__ezmq|reply|<uuid>`, so a crafted request cannot make a
/// worker push to an arbitrary queue.
fn parse_reply_to(name: &str) -> Result<Topic, EnvelopeError> {
    let bad = || EnvelopeError::BadReplyTo(name.to_owned());
    let rest = name.strip_prefix(INTERNAL_PREFIX).ok_or_else(bad)?;
    let rest = rest.strip_prefix(INTERNAL_SEPARATOR).ok_or_else(bad)?;
    let rest = rest.strip_prefix(REPLY_KIND).ok_or_else(bad)?;
    let rest = rest.strip_prefix(INTERNAL_SEPARATOR).ok_or_else(bad)?;
    let instance = Uuid::try_parse(rest).map_err(|_| bad())?;
    Ok(reply_topic(instance))
}

fn with_header<H: Serialize>(header: &H, body: &[u8]) -> Result<Bytes, serde_json::Error> {
    let header = serde_json::to_vec(header)?;
    let mut buf = BytesMut::with_capacity(header.len() + 1 + body.len());
    buf.put_slice(&header);
    buf.put_u8(b'\n');
    buf.put_slice(body);
    Ok(buf.freeze())
}

/// Encodes a request.
pub(crate) fn encode_request(
    id: Uuid,
    reply_to: &Topic,
    deadline_ms: u64,
    body: &[u8],
) -> Result<Bytes, serde_json::Error> {
    let id = id.hyphenated().to_string();
    let header = RequestHeaderOut {
        v: VERSION,
        id: &id,
        reply_to: reply_to.as_str(),
        deadline_ms,
    };
    with_header(&header, body)
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

/// Decodes a request.
pub(crate) fn decode_request(msg: &Bytes) -> Result<RequestEnvelope, EnvelopeError> {
    let (header, body) = split(msg)?;
    let id = parse_id(header.id)?;
    let reply_to = header
        .reply_to
        .ok_or(EnvelopeError::MissingField("reply_to"))?;
    let reply_to = parse_reply_to(&reply_to)?;
    let deadline_ms = header
        .deadline_ms
        .ok_or(EnvelopeError::MissingField("deadline_ms"))?;
    Ok(RequestEnvelope {
        id,
        reply_to,
        deadline_ms,
        body,
    })
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
    fn reply_topic_matches_topic_internal() {
        let u = instance();
        let expected = Topic::internal("reply", &[&u.to_string()]).unwrap();
        assert_eq!(reply_topic(u), expected);
        assert!(reply_topic(u).is_internal());
    }

    #[test]
    fn request_round_trip_is_binary_safe() {
        let id = instance();
        let reply_to = reply_topic(instance());
        let body: Vec<u8> = (0..=255u8).chain([b'\n', b'\n', 0, b'{']).collect();
        let msg = encode_request(id, &reply_to, 1_767_225_600_123, &body).unwrap();
        // Header overhead stays small.
        assert!(msg.len() - body.len() < 150, "{}", msg.len() - body.len());
        let env = decode_request(&msg).unwrap();
        assert_eq!(env.id, id);
        assert_eq!(env.reply_to, reply_to);
        assert_eq!(env.deadline_ms, 1_767_225_600_123);
        assert_eq!(&env.body[..], &body[..]);
    }

    #[test]
    fn empty_body_round_trips() {
        let id = instance();
        let msg = encode_request(id, &reply_topic(instance()), 1, b"").unwrap();
        assert!(decode_request(&msg).unwrap().body.is_empty());
        let msg = encode_reply(id, &Outcome::Ok(Bytes::new())).unwrap();
        assert_eq!(
            decode_reply(&msg).unwrap().outcome,
            Outcome::Ok(Bytes::new())
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
    fn wire_format_is_stable() {
        let id = Uuid::try_parse("67e55044-10b1-426f-9247-bb680e5fe0c8").unwrap();
        let to = reply_topic(id);
        let msg = encode_request(id, &to, 42, b"body").unwrap();
        assert_eq!(
            &msg[..],
            &b"{\"v\":1,\"id\":\"67e55044-10b1-426f-9247-bb680e5fe0c8\",\
               \"reply_to\":\"__ezmq|reply|67e55044-10b1-426f-9247-bb680e5fe0c8\",\
               \"deadline_ms\":42}\nbody"[..]
        );
        let msg = encode_reply(id, &Outcome::Ok(Bytes::from_static(b"r"))).unwrap();
        assert_eq!(
            &msg[..],
            &b"{\"v\":1,\"id\":\"67e55044-10b1-426f-9247-bb680e5fe0c8\",\"ok\":true}\nr"[..]
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

    fn req_err(msg: &[u8]) -> EnvelopeError {
        decode_request(&Bytes::copy_from_slice(msg)).unwrap_err()
    }

    #[test]
    fn malformed_input_gives_clear_errors() {
        assert!(matches!(req_err(b""), EnvelopeError::NotAnEnvelope));
        assert!(matches!(req_err(b"hello"), EnvelopeError::NotAnEnvelope));
        assert!(matches!(
            req_err(b"{\"v\":1"),
            EnvelopeError::UnterminatedHeader
        ));
        let long = [b"{".as_slice(), &[b' '; 2000], b"}\n"].concat();
        assert!(matches!(req_err(&long), EnvelopeError::UnterminatedHeader));
        assert!(matches!(req_err(b"{oops}\n"), EnvelopeError::BadHeader(_)));
        assert!(matches!(req_err(b"{}\n"), EnvelopeError::BadHeader(_)));
        assert!(matches!(
            req_err(b"{\"v\":\"1\"}\n"),
            EnvelopeError::BadHeader(_)
        ));
        assert!(matches!(
            req_err(b"{\"v\":2,\"id\":\"x\"}\nbody"),
            EnvelopeError::UnsupportedVersion(2)
        ));
        assert!(matches!(
            req_err(b"{\"v\":1}\n"),
            EnvelopeError::MissingField("id")
        ));
        assert!(matches!(
            req_err(b"{\"v\":1,\"id\":\"not-a-uuid\"}\n"),
            EnvelopeError::BadCorrelationId(_)
        ));
        let id = instance();
        let no_reply_to = format!("{{\"v\":1,\"id\":\"{id}\",\"deadline_ms\":1}}\n");
        assert!(matches!(
            req_err(no_reply_to.as_bytes()),
            EnvelopeError::MissingField("reply_to")
        ));
        for to in [
            "orders",
            "__ezmq|reply|",
            "__ezmq|reply|nope",
            "__ezmq|bc|67e55044-10b1-426f-9247-bb680e5fe0c8",
            "__ezmq|reply|67e55044-10b1-426f-9247-bb680e5fe0c8|x",
        ] {
            let msg =
                format!("{{\"v\":1,\"id\":\"{id}\",\"reply_to\":\"{to}\",\"deadline_ms\":1}}\n");
            assert!(
                matches!(req_err(msg.as_bytes()), EnvelopeError::BadReplyTo(_)),
                "{to}"
            );
        }
        let no_deadline = format!(
            "{{\"v\":1,\"id\":\"{id}\",\"reply_to\":\"{}\"}}\n",
            reply_topic(id)
        );
        assert!(matches!(
            req_err(no_deadline.as_bytes()),
            EnvelopeError::MissingField("deadline_ms")
        ));
        let no_ok = Bytes::from(format!("{{\"v\":1,\"id\":\"{id}\"}}\n"));
        assert!(matches!(
            decode_reply(&no_ok).unwrap_err(),
            EnvelopeError::MissingField("ok")
        ));
        // Messages read well.
        let e = req_err(b"{\"v\":9}\n");
        assert_eq!(e.to_string(), "unsupported request-reply format version 9");
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
        let full = encode_request(id, &reply_topic(id), 7, b"payload").unwrap();
        for n in 0..full.len() {
            let _ = decode_request(&full.slice(..n));
            let _ = decode_reply(&full.slice(..n));
        }
    }
}
