//! Broker URLs as errors, logs and `Debug` show them: the password
//! replaced by `***`.

/// `url` with the password after `user:` (between `://` and the last
/// `@`) replaced by `***`; a URL without one is returned as it is.
///
/// ```
/// use ezmq_core::spi::url_redaction::redact_password;
///
/// assert_eq!(redact_password("nats://app:s3cret@h:4222"), "nats://app:***@h:4222");
/// assert_eq!(redact_password("postgres://app@db/x"), "postgres://app@db/x");
/// ```
pub fn redact_password(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let Some(at) = url[start..].rfind('@').map(|i| start + i) else {
        return url.to_owned();
    };
    match url[start..at].find(':') {
        Some(colon) => format!("{}***{}", &url[..start + colon + 1], &url[at..]),
        None => url.to_owned(),
    }
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
            redact_password("postgres://app@db/x"),
            "postgres://app@db/x"
        );
        assert_eq!(redact_password("postgres://db/x"), "postgres://db/x");
        assert_eq!(redact_password("no scheme"), "no scheme");
    }
}
