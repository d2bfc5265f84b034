//! Buffered RESP2 request parsing (multibulk and inline) and reply buffering.

use crate::limits::{UNAUTH_MAX_ARGS, UNAUTH_MAX_BULK};
use bytes::{Buf, Bytes, BytesMut};

/// Largest number of arguments accepted in one multibulk request.
const MAX_MULTIBULK_ARGS: usize = 1024 * 1024;
/// Largest inline request line.
const MAX_INLINE_BYTES: usize = 64 * 1024;
/// Cap on any capacity reservation driven by a client-supplied length.
const MAX_PREALLOC_ARGS: usize = 1024;
/// Cap on buffer space reserved ahead for an announced bulk length.
const MAX_PREALLOC_BYTES: usize = 1024 * 1024;

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

/// Finds the first line end from `start`; returns the index of its `\r`
/// (`None` when no complete `\r\n`-terminated line is buffered).
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

/// Progress through a partially received multibulk request, so that a
/// request arriving in many pieces is parsed in linear time.
#[derive(Debug, Default)]
pub(crate) struct MultibulkState {
    /// Number of arguments announced by the `*<n>` header (0 = no header yet).
    count: usize,
    /// Offset of the next unparsed argument header.
    pos: usize,
    /// Offsets and lengths of the arguments parsed so far.
    spans: Vec<(usize, usize)>,
}

/// Size limits applied while parsing a request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Largest request (and bulk string) accepted.
    pub(crate) max_request: usize,
    /// False before a required AUTH: only small requests are accepted
    /// (at most 10 arguments of at most 16 KiB each, as Redis >= 6.2).
    pub(crate) authed: bool,
}

/// Tries to parse one request from `buf`. On success the consumed bytes are
/// removed from `buf`. `state` carries progress between calls and must be
/// reused for the same buffer.
pub(crate) fn parse_request(
    buf: &mut BytesMut,
    state: &mut MultibulkState,
    limits: Limits,
) -> Result<Parsed, ProtocolError> {
    if buf.is_empty() {
        return Ok(Parsed::Incomplete);
    }
    if buf[0] == b'*' {
        parse_multibulk(buf, state, limits)
    } else {
        parse_inline(buf)
    }
}

fn parse_multibulk(
    buf: &mut BytesMut,
    st: &mut MultibulkState,
    limits: Limits,
) -> Result<Parsed, ProtocolError> {
    let max_request = if limits.authed {
        limits.max_request
    } else {
        limits.max_request.min(UNAUTH_MAX_BULK)
    };
    if st.count == 0 {
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
        if !limits.authed && count > UNAUTH_MAX_ARGS as i64 {
            return Err(ProtocolError("unauthenticated multibulk length".into()));
        }
        if count <= 0 {
            buf.advance(end + 2);
            return Ok(Parsed::Command(Vec::new()));
        }
        st.count = count as usize;
        st.pos = end + 2;
        st.spans = Vec::with_capacity(st.count.min(MAX_PREALLOC_ARGS));
    }
    while st.spans.len() < st.count {
        let pos = st.pos;
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
            Some(n) if !limits.authed && n > UNAUTH_MAX_BULK as i64 => {
                return Err(ProtocolError("unauthenticated bulk length".into()))
            }
            Some(n) if n >= 0 && (n as u64) <= max_request as u64 => n as usize,
            _ => return Err(ProtocolError("invalid bulk length".into())),
        };
        let start = lend + 2;
        if start + len + 2 > max_request.saturating_add(64 * 1024) {
            return Err(ProtocolError("request too large".into()));
        }
        if buf.len() < start + len + 2 {
            // Reserve room for the rest of this argument, but never more than
            // a small cap on the word of the client alone.
            let need = start + len + 2 - buf.len();
            buf.reserve(need.min(MAX_PREALLOC_BYTES));
            return Ok(Parsed::Incomplete);
        }
        if &buf[start + len..start + len + 2] != b"\r\n" {
            return Err(ProtocolError("bulk string not terminated by CRLF".into()));
        }
        st.spans.push((start, len));
        st.pos = start + len + 2;
    }
    let frozen = buf.split_to(st.pos).freeze();
    let args = st
        .spans
        .drain(..)
        .map(|(s, l)| frozen.slice(s..s + l))
        .collect();
    st.count = 0;
    st.pos = 0;
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
        parse_request(&mut b, &mut MultibulkState::default(), LIMITS)
    }

    const LIMITS: Limits = Limits {
        max_request: 1 << 20,
        authed: true,
    };

    #[test]
    fn unauthenticated_requests_are_small() {
        let unauth = Limits {
            max_request: 1 << 20,
            authed: false,
        };
        let mut st = MultibulkState::default();
        let mut b = BytesMut::from(&b"*3\r\n$6\r\nADDJOB\r\n$60000000\r\n"[..]);
        let e = parse_request(&mut b, &mut st, unauth);
        assert_eq!(
            e.err(),
            Some(ProtocolError("unauthenticated bulk length".into()))
        );
        let mut b = BytesMut::from(&b"*11\r\n"[..]);
        let e = parse_request(&mut b, &mut MultibulkState::default(), unauth);
        assert_eq!(
            e.err(),
            Some(ProtocolError("unauthenticated multibulk length".into()))
        );
        let mut b = BytesMut::from(&b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"[..]);
        let ok = parse_request(&mut b, &mut MultibulkState::default(), unauth);
        assert!(matches!(ok, Ok(Parsed::Command(_))));
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
    fn multibulk_in_pieces() {
        let full = b"*3\r\n$6\r\nADDJOB\r\n$1\r\nq\r\n$4\r\nbody\r\n*1\r\n$4\r\nPING\r\n";
        let mut st = MultibulkState::default();
        let mut b = BytesMut::new();
        let mut got = Vec::new();
        for &byte in full.iter() {
            b.extend_from_slice(&[byte]);
            while let Ok(Parsed::Command(a)) = parse_request(&mut b, &mut st, LIMITS) {
                got.push(a);
            }
        }
        assert_eq!(got.len(), 2);
        assert_eq!(got[0][2], Bytes::from("body"));
        assert_eq!(got[1][0], Bytes::from("PING"));
        assert!(b.is_empty());
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
