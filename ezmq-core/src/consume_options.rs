//! Options of a consume listener.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::hooks::ListenerHooks;
use crate::rate_key::{KeyedRateLimit, RateKey};
use crate::rate_limit::RateLimit;

/// How a failed job waits before its next attempt: `initial * 2^(attempt-1)`,
/// capped at `max`, with up to 20 % random jitter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// Wait after the first failure. Default 100 ms.
    pub initial: Duration,
    /// Longest wait. Default 10 s.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// A backoff from `initial` doubling up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff { initial, max }
    }

    /// Fails unless `initial <= max <= 7 days`.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.initial > self.max {
            return Err(Error::invalid_option(
                "backoff",
                format!(
                    "the initial wait {:?} is longer than the longest {:?}",
                    self.initial, self.max
                ),
            ));
        }
        if self.max > Duration::from_secs(7 * 24 * 3600) {
            return Err(Error::invalid_option(
                "backoff",
                "the longest wait is limited to 7 days",
            ));
        }
        Ok(())
    }

    /// The wait before the attempt after `failed_attempt` (1-based), without
    /// jitter.
    pub fn delay_after(&self, failed_attempt: u32) -> Duration {
        let shift = failed_attempt.saturating_sub(1).min(30);
        self.initial.saturating_mul(1 << shift).min(self.max)
    }
}

/// Where jobs go once they have failed `max_attempts` times.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum DeadLetter {
    /// To `<topic>.dead-letter` (the default).
    #[default]
    Default,
    /// To the named topic.
    Topic(String),
    /// Dropped (logged at `error` level).
    Drop,
}

/// Options of one consume listener.
///
/// ```
/// use std::time::Duration;
/// use ezmq_core::ConsumeOptions;
///
/// let opts = ConsumeOptions::new()
///     .with_concurrency(32)
///     .with_max_attempts(3)
///     .with_dead_letter_topic("orders.failed");
/// assert!(opts.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumeOptions {
    /// Handlers running at once. Default 10.
    pub concurrency: usize,
    /// Attempts (first delivery included) before a job is dead-lettered.
    /// Default 5.
    pub max_attempts: u32,
    /// Wait between a failure and the next attempt.
    pub backoff: Backoff,
    /// Wait between failed fetches (broker down or restarting): doubles
    /// from `initial` to `max` while fetches fail, back to `initial` after
    /// one succeeds. Default 100 ms doubling to 1 s, so a listener resumes
    /// within about a second of the broker accepting connections again.
    pub fetch_error_backoff: Backoff,
    /// Where jobs that exhausted their attempts go.
    pub dead_letter: DeadLetter,
    /// On brokers with leases, a handler still running after this long
    /// makes the listener extend the job's lease (Disque `WORKING`, Redis
    /// `XCLAIM`), and again at half the lease, so the job is not
    /// redelivered while it runs.
    /// Default 500 ms: below the shortest retry window a broker accepts
    /// (Disque: 1 s, minus its random 250 ms), so no job is redelivered
    /// while its handler runs, whatever retry it was pushed with.
    pub heartbeat_after: Duration,
    /// Longest single blocking fetch; bounds how fast a shutdown stops
    /// fetching. Default 1 s.
    pub fetch_wait: Duration,
    /// Acknowledge each job *before* its handler runs: a job is never
    /// delivered twice, and a failure or a crash loses it (logged, never
    /// retried nor dead-lettered). Default off (at least once).
    pub at_most_once: bool,
    /// A handler still running after this long fails (and is retried as
    /// usual). Default `None`: no limit.
    pub handler_timeout: Option<Duration>,
    /// Callbacks on retries and dead letters.
    pub hooks: ListenerHooks,
    /// How often the listener samples its topic's queue length into the
    /// `ezmq.queue.depth` gauge (on backends with
    /// [`QueueStats`](crate::spi::QueueStats); one queue-length query each
    /// time, on Disque one `QLEN` per node). Default 5 s; `None` never.
    pub queue_depth_every: Option<Duration>,
    /// A cluster-wide limit on how often the topic's handlers start, over
    /// every listener of the topic in every process
    /// ([`ConsumeOptions::with_rate_limit`]). Default `None`: no limit.
    pub rate_limit: Option<RateLimit>,
    /// The topic's rate limit per key, cluster-wide
    /// ([`ConsumeOptions::with_rate_limit_by`]). Default `None`.
    pub rate_limit_by: Option<KeyedRateLimit>,
    /// At most this many handlers of the topic run at once, over every
    /// listener of the topic in every process
    /// ([`ConsumeOptions::with_global_concurrency`]). Default `None`.
    pub global_concurrency: Option<u32>,
    /// How long a global concurrency slot is held without renewal: a
    /// process that dies gives its slots back within about 2¼ of it.
    /// Default 4 s.
    pub slot_lease: Duration,
}

/// The highest [`ConsumeOptions::global_concurrency`]: every slot is a
/// claim a listener may have to probe.
const MAX_GLOBAL_CONCURRENCY: u32 = 256;

impl Default for ConsumeOptions {
    fn default() -> Self {
        ConsumeOptions {
            concurrency: 10,
            max_attempts: 5,
            backoff: Backoff::default(),
            fetch_error_backoff: Backoff {
                initial: Duration::from_millis(100),
                max: Duration::from_secs(1),
            },
            dead_letter: DeadLetter::Default,
            heartbeat_after: Duration::from_millis(500),
            fetch_wait: Duration::from_secs(1),
            at_most_once: false,
            handler_timeout: None,
            hooks: ListenerHooks::default(),
            queue_depth_every: Some(Duration::from_secs(5)),
            rate_limit: None,
            rate_limit_by: None,
            global_concurrency: None,
            slot_lease: Duration::from_secs(4),
        }
    }
}

impl ConsumeOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`ConsumeOptions::concurrency`].
    #[must_use]
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Sets [`ConsumeOptions::max_attempts`].
    #[must_use]
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Sets [`ConsumeOptions::backoff`].
    #[must_use]
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.backoff = Backoff { initial, max };
        self
    }

    /// Sets [`ConsumeOptions::fetch_error_backoff`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use ezmq_core::ConsumeOptions;
    ///
    /// let patient = ConsumeOptions::new()
    ///     .with_fetch_error_backoff(Duration::from_millis(50), Duration::from_secs(5));
    /// assert_eq!(patient.fetch_error_backoff.max, Duration::from_secs(5));
    /// assert!(patient.validate().is_ok());
    /// ```
    #[must_use]
    pub fn with_fetch_error_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.fetch_error_backoff = Backoff { initial, max };
        self
    }

    /// Sends dead letters to `topic`.
    #[must_use]
    pub fn with_dead_letter_topic(mut self, topic: impl Into<String>) -> Self {
        self.dead_letter = DeadLetter::Topic(topic.into());
        self
    }

    /// Sets [`ConsumeOptions::dead_letter`].
    #[must_use]
    pub fn with_dead_letter(mut self, dead_letter: DeadLetter) -> Self {
        self.dead_letter = dead_letter;
        self
    }

    /// Sets [`ConsumeOptions::heartbeat_after`].
    #[must_use]
    pub fn with_heartbeat_after(mut self, after: Duration) -> Self {
        self.heartbeat_after = after;
        self
    }

    /// Sets [`ConsumeOptions::queue_depth_every`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use ezmq_core::ConsumeOptions;
    ///
    /// let quiet = ConsumeOptions::new().with_queue_depth_every(None);
    /// assert_eq!(quiet.queue_depth_every, None);
    /// let busy = ConsumeOptions::new().with_queue_depth_every(Some(Duration::from_secs(1)));
    /// assert_eq!(busy.queue_depth_every, Some(Duration::from_secs(1)));
    /// ```
    #[must_use]
    pub fn with_queue_depth_every(mut self, every: Option<Duration>) -> Self {
        self.queue_depth_every = every;
        self
    }

    /// Sets [`ConsumeOptions::fetch_wait`].
    #[must_use]
    pub fn with_fetch_wait(mut self, wait: Duration) -> Self {
        self.fetch_wait = wait;
        self
    }

    /// Sets [`ConsumeOptions::at_most_once`].
    #[must_use]
    pub fn with_at_most_once(mut self, on: bool) -> Self {
        self.at_most_once = on;
        self
    }

    /// Sets [`ConsumeOptions::handler_timeout`].
    #[must_use]
    pub fn with_handler_timeout(mut self, timeout: Duration) -> Self {
        self.handler_timeout = Some(timeout);
        self
    }

    /// Sets [`ConsumeOptions::hooks`].
    #[must_use]
    pub fn with_hooks(mut self, hooks: ListenerHooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// Limits the topic to at most `n` handler starts per `per`, summed over
    /// every listener of the topic in every process (see [`RateLimit`] for
    /// the burst and the bound). A job the limit holds back stays in the
    /// queue: it is not fetched, so it is neither leased nor counted as an
    /// attempt. Every listener of a topic should use the same limit
    /// (listeners with different limits each get a bucket of their own).
    /// On a backend without [`Capability::RateLimit`](crate::spi::Capability::RateLimit)
    /// `add_listener` fails with [`Error::Unsupported`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use ezmq_core::ConsumeOptions;
    ///
    /// // A mail provider that takes 50 messages a second, whoever sends.
    /// let opts = ConsumeOptions::new()
    ///     .with_concurrency(8)
    ///     .with_rate_limit(50, Duration::from_secs(1));
    /// assert!(opts.validate().is_ok());
    /// ```
    #[must_use]
    pub fn with_rate_limit(mut self, n: u32, per: Duration) -> Self {
        self.rate_limit = Some(RateLimit::new(n, per));
        self
    }

    /// [`ConsumeOptions::with_rate_limit`] with a burst of its own: at most
    /// `burst` starts at once after a quiet spell (1 to `n`).
    #[must_use]
    pub fn with_rate_limit_burst(mut self, n: u32, per: Duration, burst: u32) -> Self {
        self.rate_limit = Some(RateLimit::new(n, per).with_burst(burst));
        self
    }

    /// Limits each key to at most `n` handler starts per `per`, summed
    /// over every listener of the topic in every process: at most 10 jobs
    /// a second per tenant, say, with every tenant's jobs sharing the
    /// listeners. The key comes from the job (see [`RateKey`]); a job
    /// without one is not limited by key.
    ///
    /// The key is inside the job, so the limit applies after the fetch:
    /// a job whose key is over its limit is **deferred**, handed back to
    /// the broker to come again at the start reserved for it, without
    /// counting an attempt (no retry hook, no failure). A noisy key's
    /// backlog so passes the ready queue once and then waits in delayed
    /// storage, not in front of other keys' jobs. Each key's bucket has
    /// the burst of [`RateLimit`]; at most 1,000 starts a second per key.
    /// Combines with [`ConsumeOptions::with_rate_limit`] (both hold) and
    /// the other limits. On a backend without
    /// [`Capability::RateLimitByKey`](crate::spi::Capability::RateLimitByKey)
    /// `add_listener` fails with [`Error::Unsupported`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use ezmq_core::{ConsumeOptions, RateKey};
    ///
    /// // An API that takes 10 calls a second per customer account.
    /// let opts = ConsumeOptions::new()
    ///     .with_concurrency(8)
    ///     .with_rate_limit_by(RateKey::header("account"), 10, Duration::from_secs(1));
    /// assert!(opts.validate().is_ok());
    /// ```
    #[must_use]
    pub fn with_rate_limit_by(mut self, key: RateKey, n: u32, per: Duration) -> Self {
        self.rate_limit_by = Some(KeyedRateLimit::new(key, RateLimit::new(n, per)));
        self
    }

    /// Runs at most `n` handlers of the topic at once, over every listener
    /// of the topic in every process (1 to 256): a database that falls
    /// over at 50 writers gets at most 50, however many workers run. Each
    /// listener still runs at most its own
    /// [`concurrency`](ConsumeOptions::concurrency). Slots are leases
    /// ([`ConsumeOptions::with_slot_lease`]): a process that dies without
    /// giving its slots back frees them within about 2¼ leases. A job
    /// waiting for a slot stays in the queue (not fetched, not counted as
    /// an attempt). Every listener of a topic should use the same `n` and
    /// lease. On a backend without
    /// [`Capability::GlobalConcurrency`](crate::spi::Capability::GlobalConcurrency)
    /// `add_listener` fails with [`Error::Unsupported`].
    ///
    /// ```
    /// use ezmq_core::ConsumeOptions;
    ///
    /// let opts = ConsumeOptions::new()
    ///     .with_concurrency(16)
    ///     .with_global_concurrency(5);
    /// assert!(opts.validate().is_ok());
    /// ```
    #[must_use]
    pub fn with_global_concurrency(mut self, n: u32) -> Self {
        self.global_concurrency = Some(n);
        self
    }

    /// Sets [`ConsumeOptions::slot_lease`] (1 s to 10 min).
    #[must_use]
    pub fn with_slot_lease(mut self, lease: Duration) -> Self {
        self.slot_lease = lease;
        self
    }

    /// Checks the values.
    pub fn validate(&self) -> Result<()> {
        if let Some(limit) = &self.rate_limit {
            limit.validate()?;
        }
        if let Some(limit) = &self.rate_limit_by {
            limit.validate()?;
        }
        if let Some(n) = self.global_concurrency {
            if !(1..=MAX_GLOBAL_CONCURRENCY).contains(&n) {
                return Err(Error::invalid_option(
                    "global_concurrency",
                    format!("{n} is outside 1..={MAX_GLOBAL_CONCURRENCY}"),
                ));
            }
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(600)).contains(&self.slot_lease) {
            return Err(Error::invalid_option(
                "slot_lease",
                format!("{:?} is outside 1s..=600s", self.slot_lease),
            ));
        }
        if self.concurrency == 0 {
            return Err(Error::invalid_option("concurrency", "must be at least 1"));
        }
        if self.max_attempts == 0 {
            return Err(Error::invalid_option("max_attempts", "must be at least 1"));
        }
        if self.backoff.initial > self.backoff.max {
            return Err(Error::invalid_option(
                "backoff",
                "initial wait is longer than the maximum",
            ));
        }
        if self.fetch_error_backoff.initial.is_zero()
            || self.fetch_error_backoff.initial > self.fetch_error_backoff.max
        {
            return Err(Error::invalid_option(
                "fetch_error_backoff",
                "initial wait must be positive and no longer than the maximum",
            ));
        }
        if self.handler_timeout == Some(Duration::ZERO) {
            return Err(Error::invalid_option("handler_timeout", "must be positive"));
        }
        if self.heartbeat_after.is_zero() {
            return Err(Error::invalid_option("heartbeat_after", "must be positive"));
        }
        if self.fetch_wait < Duration::from_millis(10) {
            return Err(Error::invalid_option("fetch_wait", "must be at least 10ms"));
        }
        if self
            .queue_depth_every
            .is_some_and(|every| every < Duration::from_millis(10))
        {
            return Err(Error::invalid_option(
                "queue_depth_every",
                "must be at least 10ms (or None for no sampling)",
            ));
        }
        // Bounds that keep every deadline computed from them far from
        // overflowing `Instant` arithmetic.
        const DAY: Duration = Duration::from_secs(24 * 3600);
        for (option, value, max) in [
            ("fetch_wait", self.fetch_wait, Duration::from_secs(3600)),
            ("heartbeat_after", self.heartbeat_after, DAY),
            ("backoff", self.backoff.max, 7 * DAY),
            ("fetch_error_backoff", self.fetch_error_backoff.max, DAY),
            (
                "handler_timeout",
                self.handler_timeout.unwrap_or_default(),
                7 * DAY,
            ),
            (
                "queue_depth_every",
                self.queue_depth_every.unwrap_or_default(),
                DAY,
            ),
        ] {
            if value > max {
                return Err(Error::invalid_option(
                    option,
                    format!("{value:?} is longer than the limit of {max:?}"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Backoff::default();
        assert_eq!(b.delay_after(1), Duration::from_millis(100));
        assert_eq!(b.delay_after(2), Duration::from_millis(200));
        assert_eq!(b.delay_after(40), Duration::from_secs(10));
    }

    #[test]
    fn validation() {
        assert!(ConsumeOptions::new().validate().is_ok());
        assert!(ConsumeOptions::new()
            .with_concurrency(0)
            .validate()
            .is_err());
        assert!(ConsumeOptions::new()
            .with_max_attempts(0)
            .validate()
            .is_err());
        // Huge values are refused instead of overflowing deadlines later.
        assert!(ConsumeOptions::new()
            .with_fetch_wait(Duration::MAX)
            .validate()
            .is_err());
        assert!(ConsumeOptions::new()
            .with_backoff(Duration::from_secs(1), Duration::MAX)
            .validate()
            .is_err());
        assert!(ConsumeOptions::new()
            .with_fetch_error_backoff(Duration::ZERO, Duration::from_secs(1))
            .validate()
            .is_err());
        assert!(ConsumeOptions::new()
            .with_fetch_error_backoff(Duration::from_secs(2), Duration::from_secs(1))
            .validate()
            .is_err());
    }
}
