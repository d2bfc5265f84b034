//! Argument cursor over a parsed command.

use bytes::Bytes;

/// Cursor over the arguments of one command (the name excluded).
#[derive(Debug)]
pub(crate) struct Parse<'a> {
    args: &'a [Bytes],
    pos: usize,
}

impl<'a> Parse<'a> {
    /// Creates a cursor over `args` (the command name is not included).
    pub(crate) fn new(args: &'a [Bytes]) -> Self {
        Parse { args, pos: 0 }
    }

    /// Number of arguments not consumed yet.
    pub(crate) fn remaining(&self) -> usize {
        self.args.len() - self.pos
    }

    /// Next argument as raw bytes.
    pub(crate) fn next_bytes(&mut self) -> Option<&'a Bytes> {
        let a = self.args.get(self.pos)?;
        self.pos += 1;
        Some(a)
    }

    /// Next argument parsed as a strict decimal `i64`; `Some(None)` when the
    /// argument is present but not an integer.
    pub(crate) fn next_int(&mut self) -> Option<Option<i64>> {
        self.next_bytes().map(|b| parse_i64(b))
    }

    /// True when every argument was consumed.
    pub(crate) fn finish(&self) -> bool {
        self.pos == self.args.len()
    }
}

/// Parses an integer like Disque's `getLongLongFromObject` (`strtoll`
/// with the whole string consumed): an optional sign, decimal digits,
/// leading zeros allowed; no spaces, no other characters, no overflow. As
/// in Disque, an empty string is 0.
pub(crate) fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() {
        return Some(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = if neg {
            v.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?
        } else {
            v.checked_mul(10)?.checked_add(i64::from(d - b'0'))?
        };
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"1.5"), None);
        assert_eq!(parse_i64(b"007"), Some(7));
        assert_eq!(parse_i64(b"+9"), Some(9));
        assert_eq!(parse_i64(b""), Some(0));
        assert_eq!(parse_i64(b" 5"), None);
        assert_eq!(parse_i64(b"5 "), None);
        assert_eq!(parse_i64(b"0x10"), None);
        assert_eq!(parse_i64(b"+"), None);
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
    }

    #[test]
    fn cursor() {
        let args = vec![Bytes::from("a"), Bytes::from("5")];
        let mut p = Parse::new(&args);
        assert_eq!(p.remaining(), 2);
        assert_eq!(p.next_bytes().map(|b| &b[..]), Some(&b"a"[..]));
        assert_eq!(p.next_int(), Some(Some(5)));
        assert!(p.finish());
    }
}
