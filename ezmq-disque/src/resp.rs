//! RESP2 replies, read off the shared connection ([`crate::mux`]): a
//! complete reply becomes a [`redis::Value`] (what the command parsers take)
//! or the text of an error reply.
//!
//! Completeness is checked first with a scan that jumps over bulk strings by
//! their length, so a large reply arriving in many reads is scanned once
//! per read by its headers only, and built once.

use redis::Value;

/// Deepest array nesting accepted (Disque's replies nest two levels).
const MAX_DEPTH: usize = 32;
/// Longest simple line (status, error, integer, length) accepted.
const MAX_LINE: usize = 64 * 1024;

/// One reply.
#[derive(Debug, PartialEq)]
pub(crate) enum Reply {
    /// A value.
    Value(Value),
    /// An error reply (`-CODE message`), without the `-`; an error nested in
    /// an array makes the whole reply this error.
    Error(String),
}

/// The peer sent something that is not RESP2: the connection cannot be
/// trusted any more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProtocolError(pub(crate) String);

/// Parses the reply at the start of `buf`: `Ok(None)` when it is not all
/// there yet, else the reply and how many bytes it took.
pub(crate) fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let Some(end) = scan(buf, 0, 0)? else {
        return Ok(None);
    };
    let mut pos = 0;
    let mut error = None;
    let value = build(buf, &mut pos, &mut error);
    debug_assert_eq!(pos, end);
    Ok(Some((
        match error {
            Some(text) => Reply::Error(text),
            None => Reply::Value(value),
        },
        end,
    )))
}

/// The line starting at `pos` (without its `\r\n`) and the offset after it.
fn line(buf: &[u8], pos: usize) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    let rest = buf.get(pos..).unwrap_or_default();
    match rest.iter().position(|&b| b == b'\n') {
        Some(nl) if nl > 0 && rest[nl - 1] == b'\r' => Ok(Some((&rest[..nl - 1], pos + nl + 1))),
        Some(_) => Err(ProtocolError("a reply line does not end in CRLF".into())),
        None if rest.len() > MAX_LINE => Err(ProtocolError("a reply line is too long".into())),
        None => Ok(None),
    }
}

fn number(digits: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            ProtocolError(format!(
                "expected a number, got {:?}",
                String::from_utf8_lossy(digits)
            ))
        })
}

/// Checks that a whole reply starts at `pos`; returns the offset after it.
fn scan(buf: &[u8], pos: usize, depth: usize) -> Result<Option<usize>, ProtocolError> {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    let Some((text, next)) = line(buf, pos + 1)? else {
        return Ok(None);
    };
    match kind {
        b'+' | b'-' => Ok(Some(next)),
        b':' => number(text).map(|_| Some(next)),
        b'$' => match number(text)? {
            -1 => Ok(Some(next)),
            len if len >= 0 => {
                let end = usize::try_from(len)
                    .ok()
                    .and_then(|len| next.checked_add(len))
                    .and_then(|end| end.checked_add(2))
                    .ok_or_else(|| ProtocolError("bulk length overflows".into()))?;
                match buf.get(end - 2..end) {
                    Some(b"\r\n") => Ok(Some(end)),
                    Some(_) => Err(ProtocolError("a bulk string does not end in CRLF".into())),
                    None => Ok(None),
                }
            }
            len => Err(ProtocolError(format!("bulk length {len}"))),
        },
        b'*' => {
            if depth >= MAX_DEPTH {
                return Err(ProtocolError("arrays nested too deep".into()));
            }
            match number(text)? {
                -1 => Ok(Some(next)),
                count if count >= 0 => {
                    let mut at = next;
                    for _ in 0..count {
                        match scan(buf, at, depth + 1)? {
                            Some(after) => at = after,
                            None => return Ok(None),
                        }
                    }
                    Ok(Some(at))
                }
                count => Err(ProtocolError(format!("array length {count}"))),
            }
        }
        other => Err(ProtocolError(format!(
            "unknown reply type byte {:?}",
            char::from(other)
        ))),
    }
}

/// `text` as a string (checked fast when it is UTF-8, as a node's ids
/// and messages are).
fn text_of(text: &[u8]) -> String {
    match std::str::from_utf8(text) {
        Ok(text) => text.to_owned(),
        Err(_) => String::from_utf8_lossy(text).into_owned(),
    }
}

/// Builds the reply at `*pos`, already checked complete and well formed by
/// [`scan`], and moves `*pos` past it. The first error reply met is put in
/// `error`.
fn build(buf: &[u8], pos: &mut usize, error: &mut Option<String>) -> Value {
    let kind = buf[*pos];
    let Ok(Some((text, next))) = line(buf, *pos + 1) else {
        // Unreachable after `scan`; ends the walk without panicking.
        *pos = buf.len();
        return Value::Nil;
    };
    *pos = next;
    match kind {
        b'+' if text == b"OK" => Value::Okay,
        b'+' => Value::SimpleString(text_of(text)),
        b'-' => {
            error.get_or_insert_with(|| text_of(text));
            Value::Nil
        }
        b':' => Value::Int(number(text).unwrap_or_default()),
        b'$' => match usize::try_from(number(text).unwrap_or(-1)) {
            Ok(len) => {
                let body = buf[next..next + len].to_vec();
                *pos = next + len + 2;
                Value::BulkString(body)
            }
            Err(_) => Value::Nil,
        },
        _ => match usize::try_from(number(text).unwrap_or(-1)) {
            Ok(count) => Value::Array((0..count).map(|_| build(buf, pos, error)).collect()),
            Err(_) => Value::Nil,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(input: &[u8]) -> Value {
        match parse(input) {
            Ok(Some((Reply::Value(v), used))) => {
                assert_eq!(used, input.len());
                v
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_reply_type() {
        assert_eq!(value(b"+OK\r\n"), Value::Okay);
        assert_eq!(value(b"+D-abc\r\n"), Value::SimpleString("D-abc".into()));
        assert_eq!(value(b":-42\r\n"), Value::Int(-42));
        assert_eq!(
            value(b"$3\r\na\r\n\r\n"),
            Value::BulkString(b"a\r\n".to_vec())
        );
        assert_eq!(value(b"$0\r\n\r\n"), Value::BulkString(Vec::new()));
        assert_eq!(value(b"$-1\r\n"), Value::Nil);
        assert_eq!(value(b"*-1\r\n"), Value::Nil);
        assert_eq!(
            value(b"*2\r\n*1\r\n$1\r\nq\r\n:7\r\n"),
            Value::Array(vec![
                Value::Array(vec![Value::BulkString(b"q".to_vec())]),
                Value::Int(7)
            ])
        );
    }

    #[test]
    fn errors_top_level_and_nested() {
        assert_eq!(
            parse(b"-NOREPL not enough nodes\r\n+OK\r\n").unwrap(),
            Some((Reply::Error("NOREPL not enough nodes".into()), 26))
        );
        assert_eq!(
            parse(b"*2\r\n:1\r\n-ERR inner\r\n").unwrap(),
            Some((Reply::Error("ERR inner".into()), 20))
        );
    }

    #[test]
    fn incomplete_at_every_cut() {
        let whole = b"*3\r\n$5\r\nhello\r\n:12\r\n*1\r\n+x\r\n";
        for cut in 0..whole.len() {
            assert_eq!(parse(&whole[..cut]).unwrap(), None, "cut at {cut}");
        }
        assert!(matches!(parse(whole), Ok(Some((Reply::Value(_), n))) if n == whole.len()));
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        for bad in [
            &b"?what\r\n"[..],
            b":12x\r\n",
            b"$-5\r\n",
            b"$2\r\nabcd\r\n",
            b"+no cr\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let mut deep = b"*1\r\n".repeat(MAX_DEPTH + 1);
        deep.extend_from_slice(b":1\r\n");
        assert!(parse(&deep).is_err());
    }
}
