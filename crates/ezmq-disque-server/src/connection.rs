//! Buffered RESP2 request parsing (multibulk and inline) and reply buffering.

use bytes::{Buf, Bytes, BytesMut};

/// Largest number of arguments accepted in one multibulk request.
const MAX_MULTIBULK_ARGS: usize = 1024 * 1024;
/// Largest inline request line.
const MAX_INLINE_BYTES: usize = 64 * 1024;
/// Cap on any capacity reservation driven by a client-supplied length.
const MAX_PREALLOC_ARGS: usize = 1024;

/// Result of trying to parse one request from the read buffer.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// A complete command (may be empty for an empty inline line or `*0`).
    Command(Vec<Bytes>),
    /// More bytes are needed.
    Incomplete,
}

/// A protocol error: the message is sent as `-ERR Protocol error: <msg>` and
/// the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProtocolError(pub(crate) String);

/// Finds `\r\n` (or a bare `\n` when `allow_lf`) from `start`, returns the
/// index of the line end and the index after the terminator.
fn find_crlf(buf: &[u8], start: usize) -> Option<usize> {
    let rest = buf.get(start..)?;
    let pos = memchr_nl(rest)?;
    if pos > 0 && rest[pos - 1] == b'\r' {
        Some(start + pos - 1)
    } else {
        None
    }
}

fn memchr_nl(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

fn parse_len(line: &[u8]) -> Option<i64> {
    if line.is_empty() || line.len() > 20 {
        return None;
    }
    let (neg, digits) = match line[0] {
        b'-' => (true, &line[1..]),
        _ => (false, line),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
    }
    Some(if neg { -v } else { v })
}

/// Tries to parse one request from `buf`. On success the consumed bytes are
/// removed from `buf`.
pub(crate) fn parse_request(
    buf: &mut BytesMut,
    max_request: usize,
) -> Result<Parsed, ProtocolError> {
    if buf.is_empty() {
        return Ok(Parsed::Incomplete);
    }
    if buf[0] == b'*' {
        parse_multibulk(buf, max_request)
    } else {
        parse_inline(buf)
    }
}

fn parse_multibulk(buf: &mut BytesMut, max_request: usize) -> Result<Parsed, ProtocolError> {
    let Some(end) = find_crlf(buf, 0) else {
        if buf.len() > MAX_INLINE_BYTES {
            return Err(ProtocolError("too big mbulk count string".into()));
        }
        return Ok(Parsed::Incomplete);
    };
    let count = match parse_len(&buf[1..end]) {
        Some(n) if n <= MAX_MULTIBULK_ARGS as i64 => n,
        _ => return Err(ProtocolError("invalid multibulk length".into())),
    };
    let mut pos = end + 2;
    if count <= 0 {
        buf.advance(pos);
        return Ok(Parsed::Command(Vec::new()));
    }
    let count = count as usize;
    // First pass: validate and locate every argument without copying.
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity(count.min(MAX_PREALLOC_ARGS));
    for _ in 0..count {
        if pos >= buf.len() {
            return Ok(Parsed::Incomplete);
        }
        if buf[pos] != b'$' {
            let got = buf[pos] as char;
            return Err(ProtocolError(format!("expected '$', got '{got}'")));
        }
        let Some(lend) = find_crlf(buf, pos) else {
            if buf.len() - pos > MAX_INLINE_BYTES {
                return Err(ProtocolError("too big bulk count string".into()));
            }
            return Ok(Parsed::Incomplete);
        };
        let len = match parse_len(&buf[pos + 1..lend]) {
            Some(n) if n >= 0 && (n as u64) <= max_request as u64 => n as usize,
            _ => return Err(ProtocolError("invalid bulk length".into())),
        };
        let start = lend + 2;
        if buf.len() < start + len + 2 {
            if start + len + 2 > max_request.saturating_add(64 * 1024) && start > max_request {
                return Err(ProtocolError("request too large".into()));
            }
            // Reserve room for the rest of this argument (bounded by max_request).
            let need = start + len + 2 - buf.len();
            buf.reserve(need.min(max_request));
            return Ok(Parsed::Incomplete);
        }
        if &buf[start + len..start + len + 2] != b"\r\n" {
            return Err(ProtocolError("bulk string not terminated by CRLF".into()));
        }
        spans.push((start, len));
        pos = start + len + 2;
        if pos > max_request.saturating_add(64 * 1024) {
            return Err(ProtocolError("request too large".into()));
        }
    }
    let frozen = buf.split_to(pos).freeze();
    let args = spans
        .into_iter()
        .map(|(s, l)| frozen.slice(s..s + l))
        .collect();
    Ok(Parsed::Command(args))
}

fn parse_inline(buf: &mut BytesMut) -> Result<Parsed, ProtocolError> {
    let Some(nl) = memchr_nl(buf) else {
        if buf.len() > MAX_INLINE_BYTES {
            return Err(ProtocolError("too big inline request".into()));
        }
        return Ok(Parsed::Incomplete);
    };
    let line = buf.split_to(nl + 1);
    let mut l = &line[..nl];
    if l.last() == Some(&b'\r') {
        l = &l[..l.len() - 1];
    }
    match split_args(l) {
        Some(args) => Ok(Parsed::Command(args)),
        None => Err(ProtocolError("unbalanced quotes in request".into())),
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Splits an inline command line like `sdssplitargs`: spaces separate words,
/// double quotes support escapes, single quotes only `\'`.
fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let mut inq = false;
        let mut insq = false;
        loop {
            if inq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 3 < n && line[i + 1] == b'x' {
                    if let (Some(h), Some(l)) = (hex_val(line[i + 2]), hex_val(line[i + 3])) {
                        cur.push(h * 16 + l);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        o => o,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
                i += 1;
            } else if insq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    cur.push(b'\'');
                    i += 2;
                    continue;
                } else if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                }
                cur.push(c);
                i += 1;
            } else {
                if i >= n {
                    break;
                }
                let c = line[i];
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        i += 1;
                        break;
                    }
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    _ => cur.push(c),
                }
                i += 1;
            }
        }
        out.push(Bytes::from(cur));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8]) -> Result<Parsed, ProtocolError> {
        let mut b = BytesMut::from(input);
        parse_request(&mut b, 1 << 20)
    }

    #[test]
    fn multibulk() {
        match parse(b"*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n") {
            Ok(Parsed::Command(a)) => assert_eq!(a, vec![Bytes::from("PING"), Bytes::from("hi")]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse(b"*2\r\n$4\r\nPI"), Ok(Parsed::Incomplete)));
        assert!(parse(b"*abc\r\n").is_err());
        assert!(parse(b"*1\r\n+PING\r\n").is_err());
        assert!(parse(b"*1\r\n$99999999999\r\n").is_err());
    }

    #[test]
    fn inline() {
        match parse(b"ADDJOB q \"hello world\" 0\n") {
            Ok(Parsed::Command(a)) => assert_eq!(a.len(), 4),
            other => panic!("{other:?}"),
        }
        match parse(b"\r\n") {
            Ok(Parsed::Command(a)) => assert!(a.is_empty()),
            other => panic!("{other:?}"),
        }
        assert!(parse(b"PING 'unbalanced\r\n").is_err());
    }
}
