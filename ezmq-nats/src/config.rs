//! `NatsConfig`: where the NATS servers are and how the backend uses
//! JetStream.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ezmq_core::spi::option_value as value;
use ezmq_core::spi::url_redaction::redact_password as redact;
use ezmq_core::{Error, Result};

/// The URL used when none is given.
pub const DEFAULT_URL: &str = "nats://127.0.0.1:4222";

/// Settings of a [`NatsBackend`](crate::NatsBackend). Every field has a
/// documented default; set them with the `with_*` methods.
///
/// ```
/// use std::time::Duration;
/// use ezmq_nats::NatsConfig;
///
/// let config: NatsConfig = "nats://app:secret@10.0.0.5:4222,10.0.0.6:4222?lease=60s".parse()?;
/// assert_eq!(config.lease, Duration::from_secs(60));
/// assert_eq!(config.servers(), vec!["10.0.0.5:4222", "10.0.0.6:4222"]);
/// assert!(!format!("{config:?}").contains("secret"));
/// let config = config.with_prefix("jobs").with_replicas(3);
/// assert_eq!(config.prefix, "jobs");
/// # Ok::<(), ezmq_core::Error>(())
/// ```
///
/// Its `Debug` output redacts the password in the URL, as do every error
/// and log line of this backend.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NatsConfig {
    /// `nats://[user:password@]host:port[,host:port…]`. Default
    /// `nats://127.0.0.1:4222`.
    pub url: String,
    /// The start of every stream, consumer, subject and bucket name of
    /// ezmq's: lower-case letters, digits and `_`, at most 32. Default
    /// `ezmq`.
    pub prefix: String,
    /// How long a fetched job stays with its consumer without a lease
    /// extension before JetStream delivers it again (the consumers'
    /// `AckWait`). Default 30 s.
    pub lease: Duration,
    /// Replicas of every stream ezmq creates (1, or 3 or 5 on a cluster).
    /// Default 1.
    pub replicas: usize,
    /// Timeout of one request to the server (a publish's
    /// acknowledgement, a JetStream API call). Default 5 s.
    pub command_timeout: Duration,
    /// Timeout of the first connection. Default 5 s.
    pub connect_timeout: Duration,
    /// How long a push's message id
    /// ([`PushOptions::with_message_id`](ezmq_core::PushOptions::with_message_id))
    /// is remembered (the streams' duplicate window): another push to the
    /// same topic with that id within the window stores nothing. Default
    /// 10 min.
    pub message_id_window: Duration,
}

impl fmt::Debug for NatsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsConfig")
            .field("url", &self.redacted_url())
            .field("prefix", &self.prefix)
            .field("lease", &self.lease)
            .field("replicas", &self.replicas)
            .field("command_timeout", &self.command_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("message_id_window", &self.message_id_window)
            .finish()
    }
}

impl Default for NatsConfig {
    fn default() -> Self {
        NatsConfig {
            url: DEFAULT_URL.to_owned(),
            prefix: "ezmq".to_owned(),
            lease: Duration::from_secs(30),
            replicas: 1,
            command_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            message_id_window: Duration::from_secs(600),
        }
    }
}

impl NatsConfig {
    /// A configuration for `url` with every other setting at its default.
    pub fn new(url: impl Into<String>) -> Self {
        NatsConfig {
            url: url.into(),
            ..Self::default()
        }
    }

    /// Sets [`NatsConfig::prefix`].
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets [`NatsConfig::lease`].
    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets [`NatsConfig::replicas`].
    #[must_use]
    pub fn with_replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas;
        self
    }

    /// Sets [`NatsConfig::command_timeout`].
    #[must_use]
    pub fn with_command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Sets [`NatsConfig::connect_timeout`].
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`NatsConfig::message_id_window`].
    #[must_use]
    pub fn with_message_id_window(mut self, window: Duration) -> Self {
        self.message_id_window = window;
        self
    }

    /// The settings [`NatsConfig::with_option`] takes by name, in a URL's
    /// query string or as `EZMQ_<NAME>` variables (through
    /// `ezmq::Config`):
    ///
    /// | name | sets | value |
    /// |---|---|---|
    /// | `prefix` | [`prefix`](NatsConfig::prefix) | text |
    /// | `timeout` | [`command_timeout`](NatsConfig::command_timeout) | duration |
    /// | `connect_timeout` | [`connect_timeout`](NatsConfig::connect_timeout) | duration |
    /// | `lease` | [`lease`](NatsConfig::lease) | duration |
    /// | `replicas` | [`replicas`](NatsConfig::replicas) | number |
    /// | `message_id_window` | [`message_id_window`](NatsConfig::message_id_window) | duration |
    ///
    /// Durations are `500ms`, `30s`, `2m`, `1h` or plain seconds.
    pub const OPTIONS: &'static [&'static str] = &[
        "prefix",
        "timeout",
        "connect_timeout",
        "lease",
        "replicas",
        "message_id_window",
    ];

    /// Sets the setting `name` (one of [`NatsConfig::OPTIONS`]) from its
    /// text form. Fails with [`Error::InvalidOption`] naming the setting
    /// for a value that does not parse, and listing the names for an
    /// unknown one.
    ///
    /// ```
    /// use ezmq_nats::NatsConfig;
    ///
    /// let config = NatsConfig::default().with_option("replicas", "3")?;
    /// assert_eq!(config.replicas, 3);
    /// assert!(NatsConfig::default().with_option("replica", "3").is_err());
    /// # Ok::<(), ezmq_core::Error>(())
    /// ```
    pub fn with_option(self, name: &str, text: &str) -> Result<Self> {
        Ok(match name {
            "prefix" => self.with_prefix(text.trim()),
            "timeout" => self.with_command_timeout(value::duration("timeout", text)?),
            "connect_timeout" => {
                self.with_connect_timeout(value::duration("connect_timeout", text)?)
            }
            "lease" => self.with_lease(value::duration("lease", text)?),
            "replicas" => self.with_replicas(value::number("replicas", text)?),
            "message_id_window" => {
                self.with_message_id_window(value::duration("message_id_window", text)?)
            }
            other => return Err(value::unknown("nats", other, Self::OPTIONS)),
        })
    }

    /// The URL with its password redacted: what errors and logs show.
    pub fn redacted_url(&self) -> String {
        redact(&self.url)
    }

    /// The `host:port` of every server in the URL.
    pub fn servers(&self) -> Vec<String> {
        value::hosts(&self.url, "nats://", 4222)
    }

    /// The user and password in the URL, when it has them.
    pub(crate) fn credentials(&self) -> Option<(String, String)> {
        let rest = self.url.strip_prefix("nats://")?;
        let at = rest.rfind('@')?;
        let (user, password) = rest[..at].split_once(':').unwrap_or((&rest[..at], ""));
        Some((
            value::percent_decode(user).unwrap_or_else(|| user.to_owned()),
            value::percent_decode(password).unwrap_or_else(|| password.to_owned()),
        ))
    }

    /// Checks the values that cannot work.
    pub fn validate(&self) -> Result<()> {
        if !self.url.starts_with("nats://") {
            return Err(Error::invalid_option(
                "url",
                format!("{:?} is not a nats:// URL", self.redacted_url()),
            ));
        }
        if self.servers().is_empty() {
            return Err(Error::invalid_option(
                "url",
                format!("{:?} names no server", self.redacted_url()),
            ));
        }
        let prefix_ok = !self.prefix.is_empty()
            && self.prefix.len() <= 32
            && self
                .prefix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !prefix_ok {
            return Err(Error::invalid_option(
                "prefix",
                format!(
                    "{:?} must be 1 to 32 lower-case letters, digits or `_`",
                    self.prefix
                ),
            ));
        }
        if self.lease < Duration::from_secs(1) {
            return Err(Error::invalid_option("lease", "must be at least 1 s"));
        }
        if !(1..=5).contains(&self.replicas) {
            return Err(Error::invalid_option("replicas", "must be 1 to 5"));
        }
        value::at_least_a_millisecond(&[
            ("timeout", self.command_timeout),
            ("connect_timeout", self.connect_timeout),
            ("message_id_window", self.message_id_window),
        ])
    }
}

impl FromStr for NatsConfig {
    type Err = Error;

    /// Parses `nats://[user:password@]host:port[,host:port…]` with
    /// settings in the query string (`?prefix=app&lease=30s`, the names of
    /// [`NatsConfig::OPTIONS`]).
    fn from_str(url: &str) -> Result<Self> {
        let config = value::from_url(url, |base| NatsConfig::new(base), NatsConfig::with_option)?;
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_is_taken() {
        let samples = [
            ("prefix", "app_jobs"),
            ("timeout", "2s"),
            ("connect_timeout", "1s"),
            ("lease", "10s"),
            ("replicas", "3"),
            ("message_id_window", "1h"),
        ];
        assert_eq!(samples.len(), NatsConfig::OPTIONS.len());
        let mut config = NatsConfig::default();
        for (name, text) in samples {
            config = config.with_option(name, text).unwrap();
        }
        assert_eq!(config.prefix, "app_jobs");
        assert_eq!(config.replicas, 3);
        config.validate().unwrap();
    }

    #[test]
    fn servers_and_credentials_come_from_the_url() {
        let config: NatsConfig = "nats://u:p%40ss@a:1,b".parse().unwrap();
        assert_eq!(config.servers(), vec!["a:1", "b:4222"]);
        assert_eq!(
            config.credentials(),
            Some(("u".to_owned(), "p@ss".to_owned()))
        );
        assert_eq!(config.redacted_url(), "nats://u:***@a:1,b");
        assert_eq!(NatsConfig::default().credentials(), None);
    }

    #[test]
    fn bad_values_are_named() {
        let err = "nats://h?prefix=Bad-Name"
            .parse::<NatsConfig>()
            .unwrap_err();
        assert!(err.to_string().contains("prefix"), "{err}");
        let err = "redis://h".parse::<NatsConfig>().unwrap_err();
        assert!(err.to_string().contains("nats://"), "{err}");
        let err = "nats://h?replicas=7".parse::<NatsConfig>().unwrap_err();
        assert!(err.to_string().contains("replicas"), "{err}");
    }
}
