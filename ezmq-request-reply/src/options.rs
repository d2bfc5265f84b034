//! Per-request and per-reply-listener options.

use std::time::Duration;

use ezmq_core::{ConsumeOptions, Error, PushOptions, Result};

/// Options of one request.
///
/// ```
/// use std::time::Duration;
/// use ezmq_request_reply::RequestOptions;
///
/// let opts = RequestOptions::new().with_timeout(Duration::from_millis(500));
/// assert!(opts.validate().is_ok());
/// assert!(RequestOptions::new().with_timeout(Duration::ZERO).validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestOptions {
    /// How long the caller waits for the reply, from the call (the push
    /// included). It is also the request's deadline, which travels with
    /// the request: a worker does not start a request whose deadline has
    /// passed, and the broker drops the request once it is that old
    /// (rounded up to whole seconds). Default 30 s.
    pub timeout: Duration,
}

impl Default for RequestOptions {
    fn default() -> Self {
        RequestOptions {
            timeout: Duration::from_secs(30),
        }
    }
}

impl RequestOptions {
    /// The defaults: 30 s timeout.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`RequestOptions::timeout`].
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
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

    /// The push options of the request (headers added by the caller).
    pub(crate) fn push_options(&self) -> PushOptions {
        PushOptions::new().with_ttl(Duration::from_secs(ceil_secs(self.timeout).max(1)))
    }
}

/// Options of a reply listener: how requests are consumed.
///
/// By default requests are taken **at most once**: each is acknowledged
/// before its handler runs, so it is never redelivered — a worker that dies
/// while handling it loses it (the caller times out), and a caller that
/// timed out and retries never causes the side effects twice through a
/// hidden redelivery. [`ReplyListenerOptions::with_at_least_once`] opts
/// into redelivery (the broker gives a request whose worker died to
/// another worker, while its deadline lasts); handlers must then be
/// idempotent.
///
/// Plain [`ConsumeOptions`] convert into it (at most once), so
/// `add_reply_listener_with(topic, ConsumeOptions::new().with_concurrency(4), ..)`
/// works.
///
/// ```
/// use ezmq_core::ConsumeOptions;
/// use ezmq_request_reply::ReplyListenerOptions;
///
/// let opts = ReplyListenerOptions::from(ConsumeOptions::new().with_concurrency(4));
/// assert!(opts.consume_options().at_most_once);
/// let opts = opts.with_at_least_once(true);
/// assert!(!opts.consume_options().at_most_once);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplyListenerOptions {
    /// The listener's options (concurrency, fetch wait, ...). Its
    /// `at_most_once` is overridden by
    /// [`ReplyListenerOptions::at_least_once`].
    pub consume: ConsumeOptions,
    /// Whether a request whose worker died is delivered again. Default
    /// `false` (at most once).
    pub at_least_once: bool,
}

impl From<ConsumeOptions> for ReplyListenerOptions {
    fn from(consume: ConsumeOptions) -> Self {
        ReplyListenerOptions {
            consume,
            at_least_once: false,
        }
    }
}

impl ReplyListenerOptions {
    /// The defaults: default [`ConsumeOptions`], at most once.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`ReplyListenerOptions::at_least_once`].
    #[must_use]
    pub fn with_at_least_once(mut self, on: bool) -> Self {
        self.at_least_once = on;
        self
    }

    /// Sets the concurrency: how many requests this client handles at once.
    #[must_use]
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.consume = self.consume.with_concurrency(n);
        self
    }

    /// The options the listener runs with.
    pub fn consume_options(&self) -> ConsumeOptions {
        self.consume.clone().with_at_most_once(!self.at_least_once)
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
    fn request_ttl_covers_the_timeout() {
        let p = RequestOptions::new()
            .with_timeout(Duration::from_millis(300))
            .push_options();
        assert_eq!(p.ttl, Some(Duration::from_secs(1)));
        assert!(p.validate().is_ok());
    }

    #[test]
    fn reply_listeners_are_at_most_once_by_default() {
        assert!(ReplyListenerOptions::new().consume_options().at_most_once);
        let from = ReplyListenerOptions::from(ConsumeOptions::new().with_at_most_once(false));
        assert!(from.consume_options().at_most_once);
        assert!(
            !ReplyListenerOptions::new()
                .with_at_least_once(true)
                .consume_options()
                .at_most_once
        );
    }
}
