//! Settings in their text form — a URL's query string (`?prefix=app&
//! max_payload=16MiB`) or an `EZMQ_*` environment variable — read the same
//! way by every backend.
//!
//! ```
//! use std::time::Duration;
//! use ezmq_core::spi::option_value;
//!
//! let (base, pairs) = option_value::split_query("redis://h:6379/0?prefix=app&lease=30s").unwrap();
//! assert_eq!(base, "redis://h:6379/0");
//! assert_eq!(pairs, [("prefix".to_owned(), "app".to_owned()), ("lease".to_owned(), "30s".to_owned())]);
//! assert_eq!(option_value::duration("lease", "30s").unwrap(), Duration::from_secs(30));
//! assert_eq!(option_value::bytes("max_payload", "16MiB").unwrap(), 16 << 20);
//! ```

use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};

/// Splits `url` into the URL before `?` and its `key=value` pairs,
/// percent-decoded, in order. A URL without `?` has no pairs. Fails for a
/// pair without `=` or with an empty key.
pub fn split_query(url: &str) -> Result<(&str, Vec<(String, String)>)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url, Vec::new()));
    };
    let query = query.split_once('#').map_or(query, |(q, _)| q);
    let mut pairs = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(Error::invalid_option(
                "url",
                format!("query parameter `{pair}` has no value; write `{pair}=VALUE`"),
            ));
        };
        if key.is_empty() {
            return Err(Error::invalid_option(
                "url",
                "a query parameter has no name (`=VALUE`)",
            ));
        }
        pairs.push((decode(key)?, decode(value)?));
    }
    Ok((base, pairs))
}

/// Percent-decodes `text` (`%2f` → `/`, `+` stays `+`); `None` for a `%`
/// without two hex digits or a result that is not UTF-8.
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn decode(text: &str) -> Result<String> {
    percent_decode(text).ok_or_else(|| {
        Error::invalid_option(
            "url",
            "the query has a `%` not followed by two hex digits, or is not UTF-8 once decoded",
        )
    })
}

/// A duration: `500ms`, `30s`, `2m`, `1h`, or plain seconds.
pub fn duration(option: &'static str, value: &str) -> Result<Duration> {
    let text = value.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let parsed = number.parse::<u64>().ok().and_then(|n| match unit.trim() {
        "" | "s" => Some(Duration::from_secs(n)),
        "ms" => Some(Duration::from_millis(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs),
        "h" => n.checked_mul(3600).map(Duration::from_secs),
        _ => None,
    });
    parsed.ok_or_else(|| {
        Error::invalid_option(
            option,
            format!("{value:?} is not a duration such as 500ms, 30s, 2m or 1h"),
        )
    })
}

/// The text form of `duration` that [`duration`] reads back exactly.
pub fn duration_text(duration: Duration) -> String {
    format!("{}ms", duration.as_millis())
}

/// A size in bytes: `1048576`, `512KiB`, `16MiB`, `1GiB` (powers of 1024)
/// or `500kB`, `16MB`, `1GB` (powers of 1000).
pub fn bytes(option: &'static str, value: &str) -> Result<usize> {
    let text = value.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let factor: Option<u64> = match unit.trim() {
        "" | "B" => Some(1),
        "KiB" => Some(1 << 10),
        "MiB" => Some(1 << 20),
        "GiB" => Some(1 << 30),
        "kB" | "KB" => Some(1_000),
        "MB" => Some(1_000_000),
        "GB" => Some(1_000_000_000),
        _ => None,
    };
    number
        .parse::<u64>()
        .ok()
        .zip(factor)
        .and_then(|(n, f)| n.checked_mul(f))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            Error::invalid_option(
                option,
                format!("{value:?} is not a size such as 1048576, 512KiB, 16MiB or 1GB"),
            )
        })
}

/// A number of the type asked for.
pub fn number<T: FromStr>(option: &'static str, value: &str) -> Result<T> {
    value.trim().parse().map_err(|_| {
        Error::invalid_option(option, format!("{value:?} is not a whole number in range"))
    })
}

/// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`).
pub fn boolean(option: &'static str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(Error::invalid_option(
            option,
            format!("{value:?} is not true or false"),
        )),
    }
}

/// The error for a setting named `name` that none of `known` is.
pub fn unknown(backend: &str, name: &str, known: &[&str]) -> Error {
    Error::invalid_option(
        "url",
        format!(
            "unknown option `{name}` for the {backend} backend; the options are: {}",
            known.join(", ")
        ),
    )
}

/// The `host:port` of every host in a `scheme://[userinfo@]host[:port][,host[:port]…]`
/// URL (`default_port` where one has none), in order; the scheme is
/// optional, and a query string must be split off first
/// ([`split_query`]).
///
/// ```
/// use ezmq_core::spi::option_value::hosts;
///
/// assert_eq!(hosts("nats://u:p@a:1,b", "nats://", 4222), ["a:1", "b:4222"]);
/// ```
pub fn hosts(url: &str, scheme: &str, default_port: u16) -> Vec<String> {
    let rest = url.strip_prefix(scheme).unwrap_or(url);
    let hosts = rest.rfind('@').map_or(rest, |at| &rest[at + 1..]);
    hosts
        .split(',')
        .map(|h| h.trim().trim_end_matches('/'))
        .filter(|h| !h.is_empty())
        .map(|h| {
            if h.contains(':') {
                h.to_owned()
            } else {
                format!("{h}:{default_port}")
            }
        })
        .collect()
}

/// Fails with [`Error::InvalidOption`] naming the first of `durations`
/// shorter than 1 ms: what a timeout or an interval cannot be.
pub fn at_least_a_millisecond(durations: &[(&'static str, Duration)]) -> Result<()> {
    match durations
        .iter()
        .find(|(_, value)| *value < Duration::from_millis(1))
    {
        Some((name, _)) => Err(Error::invalid_option(name, "must be at least 1 ms")),
        None => Ok(()),
    }
}

/// A backend's configuration from its URL: `new` of the URL before `?`,
/// then each `name=value` of the query string through `set` (the
/// backend's `with_option`), in order. The caller validates the result.
pub fn from_url<C>(
    url: &str,
    new: impl FnOnce(&str) -> C,
    set: impl Fn(C, &str, &str) -> Result<C>,
) -> Result<C> {
    let (base, pairs) = split_query(url)?;
    pairs
        .iter()
        .try_fold(new(base), |config, (name, text)| set(config, name, text))
}

/// The environment variable that carries the setting `name`:
/// `EZMQ_` and the name in upper case (`max_payload` → `EZMQ_MAX_PAYLOAD`).
pub fn env_var(name: &str) -> String {
    format!("EZMQ_{}", name.to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_is_built_from_its_url_in_query_order() {
        let set = |mut seen: Vec<String>, name: &str, text: &str| {
            if name == "bad" {
                return Err(Error::invalid_option("bad", "no"));
            }
            seen.push(format!("{name}={text}"));
            Ok(seen)
        };
        let built = from_url("x://h?a=1&b=2%2F", |base| vec![base.to_owned()], set).unwrap();
        assert_eq!(built, ["x://h", "a=1", "b=2/"]);
        assert!(from_url("x://h?a=1&bad=2", |_| Vec::new(), set).is_err());
        assert!(at_least_a_millisecond(&[("a", Duration::from_millis(1))]).is_ok());
        match at_least_a_millisecond(&[("a", Duration::from_secs(1)), ("b", Duration::ZERO)]) {
            Err(Error::InvalidOption { option, .. }) => assert_eq!(option, "b"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn queries_split_and_decode() {
        let (base, pairs) = split_query("amqp://u:p@h/%2f?prefix=a%2Fb&heartbeat=10#x").unwrap();
        assert_eq!(base, "amqp://u:p@h/%2f");
        assert_eq!(pairs[0], ("prefix".into(), "a/b".into()));
        assert_eq!(pairs[1], ("heartbeat".into(), "10".into()));
        assert!(split_query("redis://h?prefix").is_err());
        assert!(split_query("redis://h?=1").is_err());
        assert!(split_query("redis://h?a=%zz").is_err());
        assert_eq!(split_query("redis://h").unwrap().1, []);
    }

    #[test]
    fn values_parse_or_name_the_option() {
        assert_eq!(duration("t", "500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration("t", "2m").unwrap(), Duration::from_secs(120));
        assert_eq!(duration("t", "7").unwrap(), Duration::from_secs(7));
        let err = duration("lease", "1.5s").unwrap_err();
        assert!(err.to_string().contains("`lease`"), "{err}");
        let d = Duration::from_millis(1500);
        assert_eq!(duration("t", &duration_text(d)).unwrap(), d);
        assert_eq!(bytes("m", "16MiB").unwrap(), 16 * 1024 * 1024);
        assert_eq!(bytes("m", "2MB").unwrap(), 2_000_000);
        assert_eq!(bytes("m", "100").unwrap(), 100);
        assert!(bytes("m", "16 mb").is_err());
        assert!(number::<u16>("prefetch", "70000").is_err());
        assert!(boolean("durable", "off").is_ok_and(|b| !b));
        assert!(boolean("durable", "maybe").is_err());
        assert_eq!(env_var("max_payload"), "EZMQ_MAX_PAYLOAD");
    }
}
