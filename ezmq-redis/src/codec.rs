//! How a message is stored: stream entry fields, and the sorted-set member
//! of a delayed message.
//!
//! A stream entry has the fields
//!
//! * `body`: the body, as is;
//! * `h:<name>`: one field per header, as the push gave them: ezmq's own
//!   included, such as `ezmq-message-id` (the job id core stamped, the
//!   same through delay, retry and dead letter) and `ezmq-attempt` after
//!   a retry;
//! * `expires_at`: the expiry in Unix milliseconds, for a push with a ttl.
//!
//! so `XRANGE` in `redis-cli` shows messages readably, and a raw producer
//! only has to `XADD <stream> * body <bytes>`.
//!
//! A delayed message is a sorted-set member: 32 hex digits of nonce (so
//! equal messages stay distinct), then each field as `<length>:<bytes>`;
//! the Lua scripts decode it into `XADD` arguments.

use bytes::Bytes;
use ezmq_core::{Headers, Result};
use redis::Value;

use crate::error::unexpected;

/// The body field.
pub(crate) const BODY: &str = "body";
/// The prefix of header fields.
pub(crate) const HEADER_PREFIX: &str = "h:";
/// The expiry field (Unix ms).
pub(crate) const EXPIRES_AT: &str = "expires_at";

/// A message as stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Message {
    pub(crate) body: Bytes,
    pub(crate) headers: Headers,
    pub(crate) expires_at: Option<u64>,
}

/// A message about to be stored, borrowed from its push: what an `XADD`
/// writes without copying the body or the headers first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Outgoing<'a> {
    pub(crate) body: &'a Bytes,
    pub(crate) headers: &'a Headers,
    pub(crate) expires_at: Option<u64>,
}

/// Longest header field name (`h:` and the name) written from the stack.
const FIELD_ON_STACK: usize = 64;

impl Outgoing<'_> {
    /// Appends the `XADD` field/value arguments to `cmd` (the same as
    /// [`Outgoing::fields`], without copying the body or allocating per
    /// field: the push hot path).
    pub(crate) fn write_fields(&self, cmd: &mut redis::Cmd) {
        cmd.arg(BODY).arg(&self.body[..]);
        let mut field = [0u8; FIELD_ON_STACK];
        field[..HEADER_PREFIX.len()].copy_from_slice(HEADER_PREFIX.as_bytes());
        for (name, value) in self.headers.iter() {
            let len = HEADER_PREFIX.len() + name.len();
            match field.get_mut(HEADER_PREFIX.len()..len) {
                Some(rest) => {
                    rest.copy_from_slice(name.as_bytes());
                    cmd.arg(&field[..len]);
                }
                None => {
                    cmd.arg(format!("{HEADER_PREFIX}{name}"));
                }
            }
            cmd.arg(value);
        }
        if let Some(at) = self.expires_at {
            cmd.arg(EXPIRES_AT).arg(at);
        }
    }

    /// The `XADD` field/value arguments.
    pub(crate) fn fields(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(2 + 2 * self.headers.len() + 2);
        out.push(BODY.as_bytes().to_vec());
        out.push(self.body.to_vec());
        for (name, value) in self.headers.iter() {
            out.push(format!("{HEADER_PREFIX}{name}").into_bytes());
            out.push(value.as_bytes().to_vec());
        }
        if let Some(at) = self.expires_at {
            out.push(EXPIRES_AT.as_bytes().to_vec());
            out.push(at.to_string().into_bytes());
        }
        out
    }

    /// The sorted-set member of this message delayed.
    pub(crate) fn delayed_member(&self) -> Vec<u8> {
        let mut out = uuid::Uuid::new_v4().simple().to_string().into_bytes();
        for field in self.fields() {
            out.extend_from_slice(field.len().to_string().as_bytes());
            out.push(b':');
            out.extend_from_slice(&field);
        }
        out
    }
}

impl Message {
    /// This message, borrowed.
    pub(crate) fn outgoing(&self) -> Outgoing<'_> {
        Outgoing {
            body: &self.body,
            headers: &self.headers,
            expires_at: self.expires_at,
        }
    }

    /// The sorted-set member of this message delayed (see
    /// [`Outgoing::delayed_member`]).
    pub(crate) fn delayed_member(&self) -> Vec<u8> {
        self.outgoing().delayed_member()
    }

    /// Reads a delayed message's sorted-set member back (the inverse of
    /// [`delayed_member`](Self::delayed_member)); `None` when it is not
    /// one.
    pub(crate) fn from_member(member: &[u8]) -> Option<Self> {
        let mut fields = Vec::new();
        let mut rest = member.get(32..)?;
        while !rest.is_empty() {
            let colon = rest.iter().position(|b| *b == b':')?;
            let len: usize = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
            let field = rest.get(colon + 1..colon + 1 + len)?;
            fields.push(Value::BulkString(field.to_vec()));
            rest = &rest[colon + 1 + len..];
        }
        Message::from_fields(fields).ok()
    }

    /// Reads the fields of a stream entry (`[f1, v1, f2, v2, ...]`).
    /// Unknown fields are ignored; a missing body is an empty body.
    pub(crate) fn from_fields(fields: Vec<Value>) -> Result<Self> {
        let mut message = Message::default();
        let mut it = fields.into_iter();
        while let (Some(name), Some(value)) = (it.next(), it.next()) {
            let name = bytes_of(name)?;
            let value = bytes_of(value)?;
            if name == BODY.as_bytes() {
                message.body = Bytes::from(value);
            } else if name == EXPIRES_AT.as_bytes() {
                message.expires_at = std::str::from_utf8(&value)
                    .ok()
                    .and_then(|s| s.parse().ok());
            } else if let Some(header) = name.strip_prefix(HEADER_PREFIX.as_bytes()) {
                if let (Ok(header), Ok(value)) =
                    (String::from_utf8(header.to_vec()), String::from_utf8(value))
                {
                    message.headers.insert(header, value);
                }
            }
        }
        Ok(message)
    }
}

/// One stream entry: its id, and its message (`None` when the entry was
/// deleted while pending).
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) message: Option<Message>,
    /// Times delivered to the group (1 for a first `XREADGROUP`).
    pub(crate) deliveries: u64,
}

/// Parses `[[id, [fields...]], ...]` (an `XRANGE` reply, or one stream of
/// an `XREADGROUP` reply).
pub(crate) fn entries(command: &'static str, value: Value) -> Result<Vec<Entry>> {
    let items = match value {
        Value::Nil => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => return Err(unexpected(command, format!("entries: {other:?}"))),
    };
    items.into_iter().map(|item| entry(command, item)).collect()
}

/// Parses `[id, fields]` or `[id, fields, deliveries]` (the reclaim
/// script adds the count).
pub(crate) fn entry(command: &'static str, item: Value) -> Result<Entry> {
    let Value::Array(parts) = item else {
        return Err(unexpected(command, "entry is not an array"));
    };
    let mut parts = parts.into_iter();
    let id = parts
        .next()
        .map(bytes_of)
        .transpose()?
        .and_then(|id| String::from_utf8(id).ok())
        .ok_or_else(|| unexpected(command, "entry without id"))?;
    let message = match parts.next() {
        Some(Value::Array(fields)) if !fields.is_empty() => Some(Message::from_fields(fields)?),
        _ => None,
    };
    let deliveries = match parts.next() {
        Some(Value::Int(n)) => u64::try_from(n).unwrap_or(1).max(1),
        _ => 1,
    };
    Ok(Entry {
        id,
        message,
        deliveries,
    })
}

/// The bytes of a string reply.
pub(crate) fn bytes_of(value: Value) -> Result<Vec<u8>> {
    match value {
        Value::BulkString(b) => Ok(b),
        Value::SimpleString(s) => Ok(s.into_bytes()),
        Value::Int(n) => Ok(n.to_string().into_bytes()),
        Value::VerbatimString { text, .. } => Ok(text.into_bytes()),
        other => Err(unexpected(
            "decode",
            format!("expected a string, got {other:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &[u8]) -> Value {
        Value::BulkString(s.to_vec())
    }

    #[test]
    fn fields_round_trip() {
        let mut headers = Headers::new();
        headers.insert("tenant", "acme");
        let message = Message {
            body: Bytes::from_static(&[0, 1, 255]),
            headers,
            expires_at: Some(42),
        };
        let values: Vec<Value> = message
            .outgoing()
            .fields()
            .iter()
            .map(|f| bulk(f))
            .collect();
        assert_eq!(Message::from_fields(values).unwrap(), message);
    }

    #[test]
    fn written_fields_match_fields() {
        let mut headers = Headers::new();
        headers.insert("tenant", "acme");
        // Longer than the stack buffer for field names.
        headers.insert("n".repeat(FIELD_ON_STACK), "long");
        let message = Message {
            body: Bytes::from_static(b"hi"),
            headers,
            expires_at: Some(42),
        };
        let mut written = redis::cmd("XADD");
        message.outgoing().write_fields(&mut written);
        let mut expected = redis::cmd("XADD");
        for field in message.outgoing().fields() {
            expected.arg(field);
        }
        assert_eq!(written.get_packed_command(), expected.get_packed_command());
    }

    #[test]
    fn delayed_member_is_length_prefixed() {
        let message = Message {
            body: Bytes::from_static(b"a:b"),
            ..Message::default()
        };
        let member = message.delayed_member();
        assert_eq!(&member[32..], b"4:body3:a:b");
    }

    #[test]
    fn deleted_entries_have_no_message() {
        let parsed = entries(
            "t",
            Value::Array(vec![Value::Array(vec![bulk(b"1-0"), Value::Nil])]),
        )
        .unwrap();
        assert!(parsed[0].message.is_none());
    }
}
