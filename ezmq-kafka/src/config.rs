//! `KafkaConfig`: where the Kafka brokers are and how ezmq names and
//! creates its topics on them.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ezmq_core::spi::option_value as value;
use ezmq_core::spi::url_redaction::redact_password as redact;
use ezmq_core::{Error, Result};

/// The URL used when none is given.
pub const DEFAULT_URL: &str = "kafka://127.0.0.1:9092";

/// Settings of the Kafka backend. Every field has a documented default;
/// set them with the `with_*` methods or by name
/// ([`KafkaConfig::with_option`], a URL's query string).
///
/// ```
/// use std::time::Duration;
/// use ezmq_kafka::KafkaConfig;
///
/// let config: KafkaConfig = "kafka://10.0.0.5:9092,10.0.0.6?partitions=12".parse()?;
/// assert_eq!(config.brokers(), vec!["10.0.0.5:9092", "10.0.0.6:9092"]);
/// assert_eq!(config.partitions, 12);
/// let config = config.with_prefix("jobs").with_command_timeout(Duration::from_secs(2));
/// assert_eq!(config.prefix, "jobs");
/// # Ok::<(), ezmq_core::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KafkaConfig {
    /// `kafka://host:port[,host:port…]` (plaintext). Default
    /// `kafka://127.0.0.1:9092`.
    pub url: String,
    /// The start of every topic and group name of ezmq's: lower-case
    /// letters, digits and `-` (no `_` or `.`: see the crate README), at
    /// most 32. Default `ezmq`.
    pub prefix: String,
    /// Partitions of the topics ezmq creates: at most this many
    /// processes share one topic's jobs. Default 6.
    pub partitions: i32,
    /// Replicas of the topics ezmq creates; `-1` is the broker's default.
    /// Default -1.
    pub replication: i32,
    /// Timeout of one request (an admin call, a metadata request).
    /// Default 5 s.
    pub command_timeout: Duration,
    /// Timeout of the first connection. Default 5 s.
    pub connect_timeout: Duration,
    /// The consumer groups' session: a listener's process that stops
    /// answering (killed, hung) loses its partitions, and its unfinished
    /// jobs go to another process, this long after. Kafka accepts 6 s to
    /// 30 min by default. Default 10 s.
    pub session_timeout: Duration,
    /// How long a listener's fetch waits at the broker for records
    /// (`fetch.wait.max.ms`). Default 100 ms.
    pub fetch_wait: Duration,
    /// How often a listener commits the offsets of its finished jobs:
    /// what a killed process's successor runs again is at most the jobs
    /// finished within this long before the kill, plus the unfinished
    /// ones. Default 500 ms.
    pub commit_interval: Duration,
    /// The most records of one partition a listener takes past the
    /// oldest unfinished one (a slow job holds back at most this many of
    /// its partition, which a crash would run again). Default 1,000.
    pub max_uncommitted: u32,
    /// How long a listener whose partition moves to another process
    /// (a rebalance) waits for that partition's running jobs before it
    /// lets the partition go. Default 30 s.
    pub rebalance_grace: Duration,
}

impl fmt::Debug for KafkaConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaConfig")
            .field("url", &self.redacted_url())
            .field("prefix", &self.prefix)
            .field("partitions", &self.partitions)
            .field("replication", &self.replication)
            .field("command_timeout", &self.command_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("session_timeout", &self.session_timeout)
            .field("fetch_wait", &self.fetch_wait)
            .field("commit_interval", &self.commit_interval)
            .field("max_uncommitted", &self.max_uncommitted)
            .field("rebalance_grace", &self.rebalance_grace)
            .finish()
    }
}

impl Default for KafkaConfig {
    fn default() -> Self {
        KafkaConfig {
            url: DEFAULT_URL.to_owned(),
            prefix: "ezmq".to_owned(),
            partitions: 6,
            replication: -1,
            command_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            session_timeout: Duration::from_secs(10),
            fetch_wait: Duration::from_millis(100),
            commit_interval: Duration::from_millis(500),
            max_uncommitted: 1_000,
            rebalance_grace: Duration::from_secs(30),
        }
    }
}

impl KafkaConfig {
    /// A configuration for `url` with every other setting at its default.
    pub fn new(url: impl Into<String>) -> Self {
        KafkaConfig {
            url: url.into(),
            ..Self::default()
        }
    }

    /// Sets [`KafkaConfig::prefix`].
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets [`KafkaConfig::partitions`].
    #[must_use]
    pub fn with_partitions(mut self, partitions: i32) -> Self {
        self.partitions = partitions;
        self
    }

    /// Sets [`KafkaConfig::replication`].
    #[must_use]
    pub fn with_replication(mut self, replication: i32) -> Self {
        self.replication = replication;
        self
    }

    /// Sets [`KafkaConfig::command_timeout`].
    #[must_use]
    pub fn with_command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Sets [`KafkaConfig::connect_timeout`].
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`KafkaConfig::session_timeout`].
    #[must_use]
    pub fn with_session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Sets [`KafkaConfig::fetch_wait`].
    #[must_use]
    pub fn with_fetch_wait(mut self, wait: Duration) -> Self {
        self.fetch_wait = wait;
        self
    }

    /// Sets [`KafkaConfig::commit_interval`].
    #[must_use]
    pub fn with_commit_interval(mut self, interval: Duration) -> Self {
        self.commit_interval = interval;
        self
    }

    /// Sets [`KafkaConfig::max_uncommitted`].
    #[must_use]
    pub fn with_max_uncommitted(mut self, records: u32) -> Self {
        self.max_uncommitted = records;
        self
    }

    /// Sets [`KafkaConfig::rebalance_grace`].
    #[must_use]
    pub fn with_rebalance_grace(mut self, grace: Duration) -> Self {
        self.rebalance_grace = grace;
        self
    }

    /// The settings [`KafkaConfig::with_option`] takes by name, in a URL's
    /// query string:
    ///
    /// | name | sets | value |
    /// |---|---|---|
    /// | `prefix` | [`prefix`](KafkaConfig::prefix) | text |
    /// | `partitions` | [`partitions`](KafkaConfig::partitions) | number |
    /// | `replication` | [`replication`](KafkaConfig::replication) | number |
    /// | `timeout` | [`command_timeout`](KafkaConfig::command_timeout) | duration |
    /// | `connect_timeout` | [`connect_timeout`](KafkaConfig::connect_timeout) | duration |
    /// | `session_timeout` | [`session_timeout`](KafkaConfig::session_timeout) | duration |
    /// | `fetch_wait` | [`fetch_wait`](KafkaConfig::fetch_wait) | duration |
    /// | `commit_interval` | [`commit_interval`](KafkaConfig::commit_interval) | duration |
    /// | `max_uncommitted` | [`max_uncommitted`](KafkaConfig::max_uncommitted) | number |
    /// | `rebalance_grace` | [`rebalance_grace`](KafkaConfig::rebalance_grace) | duration |
    ///
    /// Durations are `500ms`, `30s`, `2m`, `1h` or plain seconds.
    pub const OPTIONS: &'static [&'static str] = &[
        "prefix",
        "partitions",
        "replication",
        "timeout",
        "connect_timeout",
        "session_timeout",
        "fetch_wait",
        "commit_interval",
        "max_uncommitted",
        "rebalance_grace",
    ];

    /// Sets the setting `name` (one of [`KafkaConfig::OPTIONS`]) from its
    /// text form. Fails with [`Error::InvalidOption`] naming the setting
    /// for a value that does not parse, and listing the names for an
    /// unknown one.
    ///
    /// ```
    /// use ezmq_kafka::KafkaConfig;
    ///
    /// let config = KafkaConfig::default().with_option("partitions", "3")?;
    /// assert_eq!(config.partitions, 3);
    /// assert!(KafkaConfig::default().with_option("partition", "3").is_err());
    /// # Ok::<(), ezmq_core::Error>(())
    /// ```
    pub fn with_option(self, name: &str, text: &str) -> Result<Self> {
        Ok(match name {
            "prefix" => self.with_prefix(text.trim()),
            "partitions" => self.with_partitions(value::number("partitions", text)?),
            "replication" => self.with_replication(value::number("replication", text)?),
            "timeout" => self.with_command_timeout(value::duration("timeout", text)?),
            "connect_timeout" => {
                self.with_connect_timeout(value::duration("connect_timeout", text)?)
            }
            "session_timeout" => {
                self.with_session_timeout(value::duration("session_timeout", text)?)
            }
            "fetch_wait" => self.with_fetch_wait(value::duration("fetch_wait", text)?),
            "commit_interval" => {
                self.with_commit_interval(value::duration("commit_interval", text)?)
            }
            "max_uncommitted" => self.with_max_uncommitted(value::number("max_uncommitted", text)?),
            "rebalance_grace" => {
                self.with_rebalance_grace(value::duration("rebalance_grace", text)?)
            }
            other => return Err(value::unknown("kafka", other, Self::OPTIONS)),
        })
    }

    /// The URL with any password redacted: what errors and logs show.
    pub fn redacted_url(&self) -> String {
        redact(&self.url)
    }

    /// The `host:port` of every broker in the URL (port 9092 when none
    /// is given).
    pub fn brokers(&self) -> Vec<String> {
        value::hosts(&self.url, "kafka://", 9092)
    }

    /// Checks the values that cannot work.
    pub fn validate(&self) -> Result<()> {
        if !self.url.starts_with("kafka://") {
            return Err(Error::invalid_option(
                "url",
                format!("{:?} is not a kafka:// URL", self.redacted_url()),
            ));
        }
        if self.url.contains('@') {
            return Err(Error::invalid_option(
                "url",
                format!(
                    "{:?} has credentials; this backend speaks plaintext without SASL for now",
                    self.redacted_url()
                ),
            ));
        }
        if self.brokers().is_empty() {
            return Err(Error::invalid_option(
                "url",
                format!("{:?} names no broker", self.redacted_url()),
            ));
        }
        let prefix_ok = !self.prefix.is_empty()
            && self.prefix.len() <= 32
            && self
                .prefix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !prefix_ok {
            return Err(Error::invalid_option(
                "prefix",
                format!(
                    "{:?} must be 1 to 32 lower-case letters, digits or `-`",
                    self.prefix
                ),
            ));
        }
        if self.partitions < 1 {
            return Err(Error::invalid_option("partitions", "must be at least 1"));
        }
        if self.replication == 0 || self.replication < -1 {
            return Err(Error::invalid_option(
                "replication",
                "must be -1 (the broker's default) or at least 1",
            ));
        }
        if self.max_uncommitted < 2 {
            return Err(Error::invalid_option(
                "max_uncommitted",
                "must be at least 2",
            ));
        }
        value::at_least_a_millisecond(&[
            ("timeout", self.command_timeout),
            ("connect_timeout", self.connect_timeout),
            ("session_timeout", self.session_timeout),
            ("fetch_wait", self.fetch_wait),
            ("commit_interval", self.commit_interval),
        ])
    }
}

impl FromStr for KafkaConfig {
    type Err = Error;

    /// Parses `kafka://host:port[,host:port…]` with settings in the query
    /// string (`?prefix=app&partitions=12`, the names of
    /// [`KafkaConfig::OPTIONS`]).
    fn from_str(url: &str) -> Result<Self> {
        let config = value::from_url(url, |base| KafkaConfig::new(base), KafkaConfig::with_option)?;
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
            ("prefix", "app-jobs"),
            ("partitions", "12"),
            ("replication", "3"),
            ("timeout", "2s"),
            ("connect_timeout", "1s"),
            ("session_timeout", "6s"),
            ("fetch_wait", "20ms"),
            ("commit_interval", "1s"),
            ("max_uncommitted", "100"),
            ("rebalance_grace", "5s"),
        ];
        assert_eq!(samples.len(), KafkaConfig::OPTIONS.len());
        let mut config = KafkaConfig::default();
        for (name, text) in samples {
            config = config.with_option(name, text).unwrap();
        }
        assert_eq!(config.prefix, "app-jobs");
        assert_eq!((config.partitions, config.replication), (12, 3));
        assert_eq!(config.command_timeout, Duration::from_secs(2));
        assert_eq!(config.session_timeout, Duration::from_secs(6));
        assert_eq!(config.fetch_wait, Duration::from_millis(20));
        assert_eq!(config.max_uncommitted, 100);
        assert_eq!(config.rebalance_grace, Duration::from_secs(5));
        config.validate().unwrap();
    }

    #[test]
    fn brokers_come_from_the_url() {
        let config: KafkaConfig = "kafka://a:1,b".parse().unwrap();
        assert_eq!(config.brokers(), vec!["a:1", "b:9092"]);
    }

    #[test]
    fn bad_values_are_named() {
        let named = |url: &str, option: &str| match url.parse::<KafkaConfig>() {
            Err(Error::InvalidOption { option: o, .. }) => assert_eq!(o, option, "{url}"),
            other => panic!("{url}: {other:?}"),
        };
        named("redis://h:6379", "url");
        named("kafka://", "url");
        named("kafka://h?prefix=Has_Underscore", "prefix");
        named("kafka://h?partitions=0", "partitions");
        named("kafka://h?replication=0", "replication");
        named("kafka://h?timeout=0s", "timeout");
        named("kafka://h?max_uncommitted=1", "max_uncommitted");
        named("kafka://h?fetch_wait=0ms", "fetch_wait");
    }

    #[test]
    fn credentials_are_refused_without_showing_them() {
        let err = "kafka://user:s3cret@h:9092"
            .parse::<KafkaConfig>()
            .unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
        assert!(!format!("{:?}", KafkaConfig::new("kafka://u:s3cret@h")).contains("s3cret"));
    }
}
