//! Headers inside the body, for brokers that store only a body (Disque).
//!
//! A message without headers is stored as its bare body, so raw clients
//! and ezmq interoperate and the hot path costs nothing. A message with
//! headers is stored as
//!
//! ```text
//! MAGIC (6 bytes: 00 'e' 'z' 'm' 'q' 01) | header length (u32, big endian) | headers (JSON object) | body
//! ```
//!
//! A body that does not start with `MAGIC` has no headers. A body that
//! starts with it but does not decode is kept whole, as a body without
//! headers: a foreign producer's bytes are never lost.
//!
//! ```
//! use ezmq_core::Headers;
//! use ezmq_core::spi::envelope;
//!
//! let mut headers = Headers::new();
//! headers.insert("tenant", "acme");
//! let stored = envelope::encode(&headers, b"hello");
//! let (decoded, body) = envelope::decode(stored);
//! assert_eq!(decoded, headers);
//! assert_eq!(&body[..], b"hello");
//!
//! let (none, plain) = envelope::decode("plain".into());
//! assert!(none.is_empty());
//! assert_eq!(&plain[..], b"plain");
//! ```

use bytes::Bytes;

use crate::headers::Headers;

/// The first bytes of a body that carries headers.
pub const MAGIC: &[u8; 6] = b"\0ezmq\x01";

/// `body` with `headers` in front; the bare body when there are none.
pub fn encode(headers: &Headers, body: &[u8]) -> Bytes {
    if headers.is_empty() {
        return Bytes::copy_from_slice(body);
    }
    let mut out = Vec::with_capacity(prefix_guess(headers) + body.len());
    write_prefix(headers, &mut out);
    out.extend_from_slice(body);
    Bytes::from(out)
}

/// Appends what [`encode`] puts in front of the body to `out` (nothing
/// when there are no headers): for a backend that writes the stored form
/// straight into its command, without a copy of the body.
///
/// ```
/// use ezmq_core::Headers;
/// use ezmq_core::spi::envelope;
///
/// let headers: Headers = [("tenant", "acme")].into_iter().collect();
/// let mut stored = Vec::new();
/// envelope::write_prefix(&headers, &mut stored);
/// stored.extend_from_slice(b"hello");
/// assert_eq!(&stored[..], &envelope::encode(&headers, b"hello")[..]);
/// ```
pub fn write_prefix(headers: &Headers, out: &mut Vec<u8>) {
    if headers.is_empty() {
        return;
    }
    out.reserve(prefix_guess(headers));
    out.extend_from_slice(MAGIC);
    let len_at = out.len();
    out.extend_from_slice(&[0; 4]);
    let start = out.len();
    // Serializing a string map into memory cannot fail.
    let _ = serde_json::to_writer(&mut *out, headers);
    let len = u32::try_from(out.len() - start).unwrap_or(u32::MAX);
    out[len_at..start].copy_from_slice(&len.to_be_bytes());
}

/// About the size of the prefix of `headers`.
fn prefix_guess(headers: &Headers) -> usize {
    MAGIC.len()
        + 4
        + 2
        + headers
            .iter()
            .map(|(k, v)| k.len() + v.len() + 6)
            .sum::<usize>()
}

/// The headers and the body of a stored message (see the module docs).
pub fn decode(stored: Bytes) -> (Headers, Bytes) {
    match try_decode(&stored) {
        Some((headers, start)) => (headers, stored.slice(start..)),
        None => (Headers::new(), stored),
    }
}

fn try_decode(stored: &[u8]) -> Option<(Headers, usize)> {
    let rest = stored.strip_prefix(MAGIC.as_slice())?;
    let len_bytes: [u8; 4] = rest.get(..4)?.try_into().ok()?;
    let len = usize::try_from(u32::from_be_bytes(len_bytes)).ok()?;
    let json = rest.get(4..4usize.checked_add(len)?)?;
    let headers: Headers = serde_json::from_slice(json).ok()?;
    Some((headers, MAGIC.len() + 4 + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_bodies_and_garbage_are_kept_whole() {
        let (h, b) = decode(Bytes::from_static(b"\0ezmq\x01\0\0\0\xffshort"));
        assert!(h.is_empty());
        assert_eq!(&b[..], b"\0ezmq\x01\0\0\0\xffshort");
        let empty = encode(&Headers::new(), b"x");
        assert_eq!(&empty[..], b"x");
    }

    #[test]
    fn binary_bodies_round_trip() {
        let headers: Headers = [("a", "1"), ("ezmq-attempt", "3")].into_iter().collect();
        let body = [0u8, 255, 1, 2];
        let (h, b) = decode(encode(&headers, &body));
        assert_eq!(h.attempt(), Some(3));
        assert_eq!(&b[..], &body);
    }
}
