//! Per-request options.

use std::time::Duration;

use ezmq_core::{Error, PushOptions, Result};

/// Options of one request.
///
/// ```
/// use std::time::Duration;
/// use ezmq_request_reply::RequestOptions;
///
/// let opts = RequestOptions::new()
///     .with_timeout(Duration::from_millis(500))
///     .with_at_least_once(true);
/// assert!(opts.validate().is_ok());
/// assert!(RequestOptions::new().with_timeout(Duration::ZERO).validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestOptions {
    /// How long the caller waits for the reply, from the call (the push
    /// included). It is also the request's deadline: a worker drops a
    /// request it takes after the deadline, and the broker drops the request
    /// once it is that old (rounded up to whole seconds). Default 30 s.
    pub timeout: Duration,
    /// Delivery of the request. `false` (the default): at most once — the
    /// request is never redelivered, so a worker that dies while handling
    /// it loses it and the caller gets [`Error::Timeout`]; a caller that
    /// timed out and retries never causes the side effects twice through a
    /// redelivery. `true`: at least once — the broker redelivers a request
    /// whose worker did not finish it within the retry window (half the
    /// timeout, at least 1 s), as long as the deadline has not passed; the
    /// handler must then be idempotent, since it may run twice.
    pub at_least_once: bool,
}

impl Default for RequestOptions {
    fn default() -> Self {
        RequestOptions {
            timeout: Duration::from_secs(30),
            at_least_once: false,
        }
    }
}

impl RequestOptions {
    /// The defaults: 30 s timeout, at-most-once delivery.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`RequestOptions::timeout`].
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets [`RequestOptions::at_least_once`].
    #[must_use]
    pub fn with_at_least_once(mut self, on: bool) -> Self {
        self.at_least_once = on;
        self
    }

    /// Checks the values.
    pub fn validate(&self) -> Result<()> {
        if self.timeout.is_zero() {
            return Err(Error::invalid_option("timeout", "must be positive"));
        }
        // Deadlines travel as u64 milliseconds; keep far from overflow.
        if self.timeout > Duration::from_secs(365 * 24 * 3600) {
            return Err(Error::invalid_option("timeout", "must be at most a year"));
        }
        Ok(())
    }

    /// The push options of the request job.
    pub(crate) fn push_options(&self) -> PushOptions {
        let ttl = ceil_secs(self.timeout).max(1);
        if self.at_least_once {
            let retry = (ttl / 2).max(1);
            let ttl = ttl.max(retry + 1);
            PushOptions::new()
                .with_ttl(Duration::from_secs(ttl))
                .with_retry(Duration::from_secs(retry))
        } else {
            PushOptions::at_most_once().with_ttl(Duration::from_secs(ttl))
        }
    }
}

/// `d` in whole seconds, rounded up.
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_secs_rounds_up() {
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(2)), 2);
        assert_eq!(ceil_secs(Duration::from_millis(2001)), 3);
    }

    #[test]
    fn at_most_once_by_default() {
        let p = RequestOptions::new()
            .with_timeout(Duration::from_millis(300))
            .push_options();
        assert!(p.at_most_once);
        assert_eq!(p.ttl, Some(Duration::from_secs(1)));
        assert!(p.validate().is_ok());
    }

    #[test]
    fn at_least_once_retries_within_the_ttl() {
        for ms in [1, 999, 1000, 1500, 2000, 30_000] {
            let p = RequestOptions::new()
                .with_timeout(Duration::from_millis(ms))
                .with_at_least_once(true)
                .push_options();
            assert!(!p.at_most_once);
            let (ttl, retry) = (p.ttl.unwrap(), p.retry.unwrap());
            assert!(
                retry >= Duration::from_secs(1) && retry < ttl,
                "{ms}: {p:?}"
            );
            assert!(p.validate().is_ok());
        }
    }
}
