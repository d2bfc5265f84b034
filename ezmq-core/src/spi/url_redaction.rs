//! Broker URLs as errors, logs and `Debug` show them: the password
//! replaced by `***`. Every backend and the `ezmq` facade redact with
//! this one function, so no URL form is redacted in one place and leaked
//! in another.

/// `url` with its password replaced by `***`: the one after `user:` in
/// the user info (everything between `://` and the **last** `@`, so a
/// password holding an unencoded `@` is hidden whole), and the values of
/// `pass` and `password` query parameters (the Unix-socket URLs of some
/// brokers). User info without a `:` is a user name and is shown; a URL
/// without a password is returned as it is.
///
/// ```
/// use ezmq_core::spi::url_redaction::redact_password;
///
/// assert_eq!(redact_password("nats://app:s3cret@h:4222"), "nats://app:***@h:4222");
/// assert_eq!(redact_password("amqp://u:p@ss@h/v"), "amqp://u:***@h/v");
/// assert_eq!(redact_password("redis+unix:///r.sock?pass=pw"), "redis+unix:///r.sock?pass=***");
/// assert_eq!(redact_password("postgres://app@db/x"), "postgres://app@db/x");
/// ```
pub fn redact_password(url: &str) -> String {
    let (scheme_end, rest) = match url.find("://") {
        Some(i) => (i + 3, &url[i + 3..]),
        None => (0, url),
    };
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..scheme_end]);
    let rest = match rest.rfind('@') {
        Some(at) if scheme_end > 0 => {
            let userinfo = &rest[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..colon]);
                    out.push_str(":***");
                }
                None => out.push_str(userinfo),
            }
            &rest[at..]
        }
        _ => rest,
    };
    match rest.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            for (i, param) in query.split('&').enumerate() {
                if i > 0 {
                    out.push('&');
                }
                match param.split_once('=') {
                    Some((name, _)) if matches!(name, "pass" | "password") => {
                        out.push_str(name);
                        out.push_str("=***");
                    }
                    _ => out.push_str(param),
                }
            }
        }
        None => out.push_str(rest),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_password("postgres://app:s3cret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(
            redact_password("redis://:hunter2@h:6379/2"),
            "redis://:***@h:6379/2"
        );
        assert_eq!(redact_password("rediss://u:p@ss@h:1"), "rediss://u:***@h:1");
        assert_eq!(
            redact_password("disque://:pw@a:7711,b:7711?retry=30s"),
            "disque://:***@a:7711,b:7711?retry=30s"
        );
        assert_eq!(
            redact_password("redis+unix:///tmp/r.sock?db=1&pass=pw&password=x"),
            "redis+unix:///tmp/r.sock?db=1&pass=***&password=***"
        );
    }

    #[test]
    fn urls_without_a_password_are_kept() {
        assert_eq!(
            redact_password("postgres://app@db/x"),
            "postgres://app@db/x"
        );
        assert_eq!(redact_password("postgres://db/x"), "postgres://db/x");
        assert_eq!(redact_password("amqp://h:5672/%2f"), "amqp://h:5672/%2f");
        assert_eq!(redact_password("no scheme"), "no scheme");
        assert_eq!(redact_password("no scheme@h"), "no scheme@h");
    }
}
