//! Disque-only push options, attached with
//! [`PushOptions::with_backend_options`](ezmq_core::PushOptions::with_backend_options).

use std::time::Duration;

use ezmq_core::{Error, Result};

/// Options only Disque has, for one push. Other backends ignore them.
///
/// ```
/// use std::time::Duration;
/// use ezmq_core::PushOptions;
/// use ezmq_disque::DisquePushOptions;
///
/// let opts = PushOptions::new().with_backend_options(
///     DisquePushOptions::new().with_replicate(3).with_retry(Duration::from_secs(60)),
/// );
/// assert_eq!(opts.backend_options::<DisquePushOptions>().unwrap().replicate, Some(3));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DisquePushOptions {
    /// Nodes that must hold a copy before the push returns (`REPLICATE`).
    /// Default: [`DisqueConfig::default_replicate`](crate::DisqueConfig), else
    /// `min(2, nodes)`.
    pub replicate: Option<u32>,
    /// Time after a delivery without ACK before Disque delivers the job
    /// again (`RETRY`, the lease). Default 30 s.
    pub retry: Option<Duration>,
    /// Refuse the push with [`Error::QueueFull`] when the queue already
    /// holds this many jobs (`MAXLEN`).
    pub maxlen: Option<u32>,
    /// Return once the job is stored on one node, replicating in the
    /// background (`ASYNC`).
    pub async_replication: bool,
    /// Deliver at most once: never redeliver, keep a single copy
    /// (`RETRY 0 REPLICATE 1`).
    pub at_most_once: bool,
    /// How long the push may wait for replication before failing.
    pub timeout: Option<Duration>,
}

impl DisquePushOptions {
    /// Every default.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`DisquePushOptions::replicate`].
    #[must_use]
    pub fn with_replicate(mut self, copies: u32) -> Self {
        self.replicate = Some(copies);
        self
    }

    /// Sets [`DisquePushOptions::retry`].
    #[must_use]
    pub fn with_retry(mut self, retry: Duration) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Sets [`DisquePushOptions::maxlen`].
    #[must_use]
    pub fn with_maxlen(mut self, maxlen: u32) -> Self {
        self.maxlen = Some(maxlen);
        self
    }

    /// Sets [`DisquePushOptions::async_replication`].
    #[must_use]
    pub fn with_async_replication(mut self, on: bool) -> Self {
        self.async_replication = on;
        self
    }

    /// Sets [`DisquePushOptions::at_most_once`].
    #[must_use]
    pub fn with_at_most_once(mut self, on: bool) -> Self {
        self.at_most_once = on;
        self
    }

    /// Sets [`DisquePushOptions::timeout`].
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Checks the values that cannot work.
    pub fn validate(&self) -> Result<()> {
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
        assert!(DisquePushOptions::new().validate().is_ok());
        let amo = DisquePushOptions::new().with_at_most_once(true);
        assert!(amo.clone().with_replicate(2).validate().is_err());
        assert!(amo.with_retry(s(1)).validate().is_err());
        assert!(DisquePushOptions::new().with_maxlen(0).validate().is_err());
        assert!(DisquePushOptions::new()
            .with_replicate(0)
            .validate()
            .is_err());
        assert!(DisquePushOptions::new()
            .with_retry(Duration::ZERO)
            .validate()
            .is_err());
    }
}
