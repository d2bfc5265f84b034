//! `RabbitConfig`: connection and topology settings.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub(crate) use ezmq_core::spi::url_redaction::redact_password as redact;
use ezmq_core::{Error, Result};

/// The URL used when none is given: a local broker with the default user.
pub const DEFAULT_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// The kind of queue ezmq declares for topics, delay levels, broadcast
/// groups and cron claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueueType {
    /// Raft-replicated queues (RabbitMQ ≥ 3.8; message TTL and
    /// at-least-once dead-lettering need ≥ 3.10): a cluster node loss
    /// loses nothing that was confirmed. Always durable.
    Quorum,
    /// Classic queues: stored on one node; faster, but lost with that node
    /// (unless mirrored by a policy).
    Classic,
}

impl QueueType {
    /// The `x-queue-type` value.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueType::Quorum => "quorum",
            QueueType::Classic => "classic",
        }
    }
}

impl fmt::Display for QueueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Settings of a [`RabbitBackend`](crate::RabbitBackend).
///
/// ```
/// use std::time::Duration;
/// use ezmq_rabbitmq::{QueueType, RabbitConfig};
///
/// let config = RabbitConfig::default()
///     .with_url("amqp://user:secret@rabbit.internal:5672/prod")
///     .with_queue_type(QueueType::Classic)
///     .with_prefetch(64)
///     .with_consumer_timeout(Duration::from_secs(15 * 60));
/// assert!(config.validate().is_ok());
/// let parsed: RabbitConfig = "amqp://guest:guest@127.0.0.1:5672/%2f".parse().unwrap();
/// assert_eq!(parsed.url, ezmq_rabbitmq::DEFAULT_URL);
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RabbitConfig {
    /// `amqp://user:pass@host:port/vhost` (vhost URL-encoded: `%2f` is
    /// `/`). Default [`DEFAULT_URL`].
    pub url: String,
    /// Most unacknowledged messages the broker sends one listener
    /// (`basic.qos`). `None` (default): the listener's concurrency, learned
    /// from its first fetch (the largest fetch size seen; it only grows).
    pub prefetch: Option<u16>,
    /// The type of the queues ezmq declares. Default [`QueueType::Quorum`];
    /// reply inboxes are always classic (exclusive queues cannot be quorum).
    pub queue_type: QueueType,
    /// Declare durable queues and exchanges. Default `true` (quorum queues
    /// are always durable).
    pub durable: bool,
    /// Publish persistent messages (delivery mode 2). Default `true`.
    pub persistent: bool,
    /// Prefix of every queue and exchange name ezmq declares (a topic `t`
    /// is the queue `<prefix>t`). Default empty.
    pub queue_prefix: String,
    /// The broker's `consumer_timeout`: how long a handler may hold a
    /// message before the broker closes its channel and redelivers it.
    /// Reported as the delivery deadline (listeners warn near it). Default
    /// 30 minutes, RabbitMQ's default; set it to what the broker uses.
    pub consumer_timeout: Duration,
    /// Bound of one connection attempt. Default 10 s.
    pub connect_timeout: Duration,
    /// Bound of every exchange with the broker once connected: a publish
    /// and its confirm, a declaration, opening or closing a channel. A
    /// broker that stops answering (hung, or blocking publishers under a
    /// memory or disk alarm) fails the call with a timeout instead of
    /// holding it forever. A publish that timed out after it was handed to
    /// the connection fails with [`Error::OutcomeUnknown`]: it may have
    /// been stored, and pushing it again may store it twice. Default 10 s.
    pub operation_timeout: Duration,
    /// Longest pause between reconnection attempts (they start at 100 ms
    /// and double). Default 500 ms: a listener resumes within about a
    /// second of the broker accepting connections again.
    pub max_reconnect_backoff: Duration,
    /// Number of binary delay levels: one pass through them holds up to
    /// `2^levels - 1` ms; longer delays take several passes. Default 32
    /// (level 31 waits 2^31 ms, about 24.9 days; one pass up to 49.7
    /// days). At most 32 (RabbitMQ's timers).
    pub delay_levels: u8,
}

impl fmt::Debug for RabbitConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitConfig")
            .field("url", &redact(&self.url))
            .field("prefetch", &self.prefetch)
            .field("queue_type", &self.queue_type)
            .field("durable", &self.durable)
            .field("persistent", &self.persistent)
            .field("queue_prefix", &self.queue_prefix)
            .field("consumer_timeout", &self.consumer_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .field("max_reconnect_backoff", &self.max_reconnect_backoff)
            .field("delay_levels", &self.delay_levels)
            .finish()
    }
}

impl Default for RabbitConfig {
    fn default() -> Self {
        RabbitConfig {
            url: DEFAULT_URL.to_owned(),
            prefetch: None,
            queue_type: QueueType::Quorum,
            durable: true,
            persistent: true,
            queue_prefix: String::new(),
            consumer_timeout: Duration::from_secs(30 * 60),
            connect_timeout: Duration::from_secs(10),
            operation_timeout: Duration::from_secs(10),
            max_reconnect_backoff: Duration::from_millis(500),
            delay_levels: 32,
        }
    }
}

impl RabbitConfig {
    /// Sets [`RabbitConfig::url`].
    #[must_use]
    pub fn with_url(mut self, url: impl Into<String>) -> Self {
        self.url = url.into();
        self
    }

    /// Sets [`RabbitConfig::prefetch`] to a fixed value.
    #[must_use]
    pub fn with_prefetch(mut self, prefetch: u16) -> Self {
        self.prefetch = Some(prefetch);
        self
    }

    /// Sets [`RabbitConfig::queue_type`].
    #[must_use]
    pub fn with_queue_type(mut self, queue_type: QueueType) -> Self {
        self.queue_type = queue_type;
        self
    }

    /// Sets [`RabbitConfig::durable`].
    #[must_use]
    pub fn with_durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// Sets [`RabbitConfig::persistent`].
    #[must_use]
    pub fn with_persistent(mut self, persistent: bool) -> Self {
        self.persistent = persistent;
        self
    }

    /// Sets [`RabbitConfig::queue_prefix`].
    #[must_use]
    pub fn with_queue_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.queue_prefix = prefix.into();
        self
    }

    /// Sets [`RabbitConfig::consumer_timeout`].
    #[must_use]
    pub fn with_consumer_timeout(mut self, timeout: Duration) -> Self {
        self.consumer_timeout = timeout;
        self
    }

    /// Sets [`RabbitConfig::connect_timeout`].
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`RabbitConfig::operation_timeout`].
    #[must_use]
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// Sets [`RabbitConfig::max_reconnect_backoff`].
    #[must_use]
    pub fn with_max_reconnect_backoff(mut self, backoff: Duration) -> Self {
        self.max_reconnect_backoff = backoff;
        self
    }

    /// Sets [`RabbitConfig::delay_levels`] (1 to 32).
    #[must_use]
    pub fn with_delay_levels(mut self, levels: u8) -> Self {
        self.delay_levels = levels;
        self
    }

    /// Checks the values that cannot work.
    pub fn validate(&self) -> Result<()> {
        if !(self.url.starts_with("amqp://") || self.url.starts_with("amqps://")) {
            return Err(Error::invalid_option(
                "url",
                format!("{:?} is not an amqp:// or amqps:// URL", redact(&self.url)),
            ));
        }
        if self.queue_type == QueueType::Quorum && !self.durable {
            return Err(Error::invalid_option(
                "durable",
                "quorum queues are always durable; use QueueType::Classic for transient queues",
            ));
        }
        if self.prefetch == Some(0) {
            return Err(Error::invalid_option("prefetch", "must be at least 1"));
        }
        if !(1..=32).contains(&self.delay_levels) {
            return Err(Error::invalid_option(
                "delay_levels",
                "must be between 1 and 32",
            ));
        }
        if self.queue_prefix.len() > 40 {
            return Err(Error::invalid_option(
                "queue_prefix",
                "must be at most 40 bytes",
            ));
        }
        if self.connect_timeout.is_zero() {
            return Err(Error::invalid_option("connect_timeout", "must not be zero"));
        }
        if self.operation_timeout.is_zero() {
            return Err(Error::invalid_option(
                "operation_timeout",
                "must not be zero",
            ));
        }
        Ok(())
    }

    /// The longest delay one pass through the delay levels holds.
    pub fn max_delay(&self) -> Duration {
        let levels = u32::from(self.delay_levels.min(32));
        Duration::from_millis((1u64 << levels) - 1)
    }
}

impl FromStr for RabbitConfig {
    type Err = Error;

    /// A configuration with this URL, the settings in its query string
    /// (`?prefix=app.&prefetch=50`, the names of [`RabbitConfig::OPTIONS`])
    /// and every other default.
    fn from_str(url: &str) -> Result<Self> {
        let config = RabbitConfig::from_url_with_query(url)?;
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_validation() {
        let c = RabbitConfig::default();
        assert_eq!(c.queue_type, QueueType::Quorum);
        assert!(c.durable && c.persistent);
        assert!(c.validate().is_ok());
        assert!(c.clone().with_durable(false).validate().is_err());
        assert!(c
            .clone()
            .with_durable(false)
            .with_queue_type(QueueType::Classic)
            .validate()
            .is_ok());
        assert!("redis://x".parse::<RabbitConfig>().is_err());
        assert!(c.clone().with_delay_levels(0).validate().is_err());
        assert_eq!(
            c.with_delay_levels(10).max_delay(),
            Duration::from_millis(1023)
        );
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("amqp://u:secret@h:5672/v"), "amqp://u:***@h:5672/v");
        // An unencoded `@` in the password: hidden whole, not up to the first `@`.
        assert_eq!(redact("amqp://u:p@ss@h:5672/v"), "amqp://u:***@h:5672/v");
        assert_eq!(redact("amqp://h:5672"), "amqp://h:5672");
    }
}
