//! Per-push options.

use std::time::Duration;

use crate::error::{Error, Result};

/// Options of one push. Every field left unset takes the client's default
/// (see the backend's configuration for the values).
///
/// Durations are sent to brokers that count in whole seconds (Disque) rounded
/// *up*, so a delay is never shorter than asked.
///
/// ```
/// use std::time::Duration;
/// use ezmq_core::PushOptions;
///
/// let opts = PushOptions::new()
///     .with_delay(Duration::from_secs(5))
///     .with_ttl(Duration::from_secs(3600))
///     .with_maxlen(10_000);
/// assert!(opts.validate().is_ok());
/// assert!(PushOptions::new().with_ttl(Duration::ZERO).validate().is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PushOptions {
    /// Time before the job becomes deliverable.
    pub delay: Option<Duration>,
    /// Time after a delivery without ACK before the job is delivered again.
    pub retry: Option<Duration>,
    /// Time after which the job is dropped, delivered or not.
    pub ttl: Option<Duration>,
    /// Number of broker nodes that must hold a copy before the push returns.
    pub replicate: Option<u32>,
    /// Refuse the push with [`Error::QueueFull`] when the queue already holds
    /// this many jobs.
    pub maxlen: Option<u32>,
    /// Return once the job is stored on one node, replicating in the
    /// background.
    pub async_replication: bool,
    /// Deliver at most once: never redeliver, keep a single copy.
    pub at_most_once: bool,
    /// How long the push may wait for replication before failing.
    pub timeout: Option<Duration>,
}

impl PushOptions {
    /// Options that take every default.
    pub fn new() -> Self {
        Self::default()
    }

    /// Options for at-most-once delivery (no redelivery, one copy).
    pub fn at_most_once() -> Self {
        PushOptions {
            at_most_once: true,
            ..Self::default()
        }
    }

    /// Sets [`PushOptions::delay`].
    #[must_use]
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Sets [`PushOptions::retry`].
    #[must_use]
    pub fn with_retry(mut self, retry: Duration) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Sets [`PushOptions::ttl`].
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets [`PushOptions::replicate`].
    #[must_use]
    pub fn with_replicate(mut self, copies: u32) -> Self {
        self.replicate = Some(copies);
        self
    }

    /// Sets [`PushOptions::maxlen`].
    #[must_use]
    pub fn with_maxlen(mut self, maxlen: u32) -> Self {
        self.maxlen = Some(maxlen);
        self
    }

    /// Sets [`PushOptions::async_replication`].
    #[must_use]
    pub fn with_async_replication(mut self, on: bool) -> Self {
        self.async_replication = on;
        self
    }

    /// Sets [`PushOptions::at_most_once`].
    #[must_use]
    pub fn with_at_most_once(mut self, on: bool) -> Self {
        self.at_most_once = on;
        self
    }

    /// Sets [`PushOptions::timeout`].
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Checks the values that cannot work whatever the backend.
    pub fn validate(&self) -> Result<()> {
        if let Some(ttl) = self.ttl {
            if ttl < Duration::from_secs(1) {
                return Err(Error::invalid_option("ttl", "must be at least 1s"));
            }
            if let Some(delay) = self.delay {
                if delay >= ttl {
                    return Err(Error::invalid_option(
                        "delay",
                        format!("{delay:?} must be shorter than the ttl {ttl:?}"),
                    ));
                }
            }
        }
        if self.retry == Some(Duration::ZERO) {
            return Err(Error::invalid_option(
                "retry",
                "must be positive; use at_most_once for no redelivery",
            ));
        }
        if self.at_most_once && self.retry.is_some() {
            return Err(Error::invalid_option(
                "retry",
                "cannot be set on an at-most-once push",
            ));
        }
        if self.replicate == Some(0) {
            return Err(Error::invalid_option("replicate", "must be at least 1"));
        }
        if self.at_most_once && self.replicate.is_some_and(|r| r > 1) {
            return Err(Error::invalid_option(
                "replicate",
                "an at-most-once push keeps a single copy",
            ));
        }
        if self.maxlen == Some(0) {
            return Err(Error::invalid_option("maxlen", "must be at least 1"));
        }
        if self.timeout == Some(Duration::ZERO) {
            return Err(Error::invalid_option("timeout", "must be positive"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_impossible_combinations() {
        let s = Duration::from_secs;
        assert!(PushOptions::new().validate().is_ok());
        assert!(PushOptions::new()
            .with_delay(s(10))
            .with_ttl(s(10))
            .validate()
            .is_err());
        assert!(PushOptions::at_most_once()
            .with_replicate(2)
            .validate()
            .is_err());
        assert!(PushOptions::at_most_once()
            .with_retry(s(1))
            .validate()
            .is_err());
        assert!(PushOptions::new().with_maxlen(0).validate().is_err());
        assert!(PushOptions::new().with_replicate(0).validate().is_err());
        assert!(PushOptions::new()
            .with_retry(Duration::ZERO)
            .validate()
            .is_err());
    }
}
