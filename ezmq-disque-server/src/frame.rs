//! RESP2 frames and their encoding.

use bytes::{BufMut, Bytes, BytesMut};

/// A RESP2 reply frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    /// Status reply: `+text`.
    Status(Bytes),
    /// Error reply: `-CODE message`.
    Error(Bytes),
    /// Integer reply: `:n`.
    Integer(i64),
    /// Bulk string reply: `$len\r\n...`.
    Bulk(Bytes),
    /// Null bulk string: `$-1`.
    NullBulk,
    /// Null multi-bulk: `*-1`.
    NullArray,
    /// Multi-bulk reply.
    Array(Vec<Frame>),
}

impl Frame {
    /// Status reply from a static string.
    pub(crate) fn status(s: &'static str) -> Frame {
        Frame::Status(Bytes::from_static(s.as_bytes()))
    }

    /// Error reply from a static string (must include the code, e.g. `ERR ...`).
    pub(crate) fn error(s: &'static str) -> Frame {
        Frame::Error(Bytes::from_static(s.as_bytes()))
    }

    /// Error reply from an owned string (must include the code).
    pub(crate) fn error_owned(s: String) -> Frame {
        Frame::Error(Bytes::from(s))
    }

    /// Bulk reply from a static string.
    pub(crate) fn bulk_static(s: &'static str) -> Frame {
        Frame::Bulk(Bytes::from_static(s.as_bytes()))
    }

    /// Appends the wire encoding of this frame to `out`.
    pub(crate) fn write_to(&self, out: &mut BytesMut) {
        match self {
            Frame::Status(s) => {
                out.reserve(s.len() + 3);
                out.put_u8(b'+');
                out.put_slice(s);
                out.put_slice(b"\r\n");
            }
            Frame::Error(s) => {
                out.reserve(s.len() + 3);
                out.put_u8(b'-');
                out.put_slice(s);
                out.put_slice(b"\r\n");
            }
            Frame::Integer(n) => {
                out.put_u8(b':');
                write_int(out, *n);
                out.put_slice(b"\r\n");
            }
            Frame::Bulk(b) => {
                out.reserve(b.len() + 16);
                out.put_u8(b'$');
                write_int(out, b.len() as i64);
                out.put_slice(b"\r\n");
                out.put_slice(b);
                out.put_slice(b"\r\n");
            }
            Frame::NullBulk => out.put_slice(b"$-1\r\n"),
            Frame::NullArray => out.put_slice(b"*-1\r\n"),
            Frame::Array(items) => {
                out.put_u8(b'*');
                write_int(out, items.len() as i64);
                out.put_slice(b"\r\n");
                for f in items {
                    f.write_to(out);
                }
            }
        }
    }
}

/// Writes a decimal integer without allocating.
pub(crate) fn write_int(out: &mut BytesMut, n: i64) {
    let mut buf = [0u8; 24];
    let mut i = buf.len();
    let neg = n < 0;
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        buf[i] = b'-';
    }
    out.put_slice(&buf[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_all_kinds() {
        let mut out = BytesMut::new();
        Frame::Array(vec![
            Frame::status("OK"),
            Frame::error("ERR x"),
            Frame::Integer(-42),
            Frame::bulk_static("hi"),
            Frame::NullBulk,
            Frame::NullArray,
        ])
        .write_to(&mut out);
        assert_eq!(
            &out[..],
            b"*6\r\n+OK\r\n-ERR x\r\n:-42\r\n$2\r\nhi\r\n$-1\r\n*-1\r\n"
        );
    }
}
