//! Per-push options.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::consume_options::Backoff;
use crate::error::{Error, Result};
use crate::headers::{Headers, RESERVED_HEADER_PREFIX};
use crate::job::JobId;
use crate::lane_mark::MAX_PRIORITY_DELAY;
use crate::priority::Priority;
use crate::unique::UniqueKey;

/// Options of one push, the same on every backend. Options only one broker
/// has (Disque's replication factor, say) go in a typed backend extension
/// ([`PushOptions::with_backend_options`]); other backends ignore it.
///
/// Durations are sent to brokers that count in whole seconds (Disque)
/// rounded *up*, so a delay is never shorter than asked.
///
/// ```
/// use std::time::Duration;
/// use ezmq_core::PushOptions;
///
/// let opts = PushOptions::new()
///     .with_delay(Duration::from_secs(5))
///     .with_ttl(Duration::from_secs(3600))
///     .with_header("tenant", "acme")
///     .with_message_id("order-42");
/// assert!(opts.validate().is_ok());
/// assert!(PushOptions::new().with_ttl(Duration::ZERO).validate().is_err());
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct PushOptions {
    /// Time before the message becomes deliverable (never earlier). Needs
    /// [`Capability::DelayedDelivery`](crate::spi::Capability::DelayedDelivery).
    pub delay: Option<Duration>,
    /// Time after which the message is dropped, delivered or not. Unset:
    /// the backend's default (Disque 1 day; Redis and RabbitMQ keep it
    /// until consumed).
    pub ttl: Option<Duration>,
    /// Headers the message carries to its handler.
    pub headers: Headers,
    /// The job's id, chosen by the producer: it is the job's
    /// [`JobId`], and on a backend with
    /// [`Capability::IdempotentPush`](crate::spi::Capability::IdempotentPush)
    /// a second push with the same id stores nothing. Unset: core gives the
    /// job a new UUIDv7.
    pub message_id: Option<String>,
    /// The job's own attempt limit, instead of the listener's
    /// [`ConsumeOptions::max_attempts`](crate::ConsumeOptions::max_attempts)
    /// (1: never retried).
    pub max_attempts: Option<u32>,
    /// The job's own retry backoff, instead of the listener's.
    pub backoff: Option<Backoff>,
    /// The job's unique key: while a job with it exists, another push
    /// with it stores nothing ([`PushOptions::with_unique_key`]).
    pub unique: Option<UniqueKey>,
    /// The job's priority: the lane of its topic it waits in
    /// ([`PushOptions::with_priority`]).
    pub priority: Priority,
    /// An existing job's id to keep (a requeue): the job keeps it, without
    /// deduplication.
    job_id: Option<String>,
    backend: Option<Arc<dyn Any + Send + Sync>>,
}

impl fmt::Debug for PushOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushOptions")
            .field("delay", &self.delay)
            .field("ttl", &self.ttl)
            .field("headers", &self.headers)
            .field("message_id", &self.message_id)
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .field("unique", &self.unique)
            .field("priority", &self.priority)
            .field("job_id", &self.job_id)
            .field("backend_options", &self.backend.is_some())
            .finish()
    }
}

impl PushOptions {
    /// Options that take every default.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`PushOptions::delay`].
    #[must_use]
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Sets [`PushOptions::ttl`].
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Adds header `name: value`.
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name, value);
        self
    }

    /// Replaces the headers.
    #[must_use]
    pub fn with_headers(mut self, headers: Headers) -> Self {
        self.headers = headers;
        self
    }

    /// Sets [`PushOptions::message_id`].
    #[must_use]
    pub fn with_message_id(mut self, id: impl Into<String>) -> Self {
        self.message_id = Some(id.into());
        self
    }

    /// Sets [`PushOptions::max_attempts`]: this job's attempt limit.
    #[must_use]
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = Some(max_attempts);
        self
    }

    /// This job is never retried: its first failure dead-letters it
    /// (`with_max_attempts(1)`).
    #[must_use]
    pub fn without_retry(self) -> Self {
        self.with_max_attempts(1)
    }

    /// Sets [`PushOptions::backoff`]: this job's wait between attempts,
    /// `initial` doubling up to `max` (as
    /// [`ConsumeOptions::with_backoff`](crate::ConsumeOptions::with_backoff)).
    #[must_use]
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.backoff = Some(Backoff::new(initial, max));
        self
    }

    /// Sets [`PushOptions::priority`]: `High` jobs are taken before
    /// `Normal` ones, `Low` ones after, with weights that never starve a
    /// lane (see [`Priority`]). Needs
    /// [`Capability::Priorities`](crate::spi::Capability::Priorities) for
    /// anything but `Normal`; a prioritized delay is at most 29 days.
    ///
    /// ```
    /// use ezmq_core::{Priority, PushOptions};
    ///
    /// let urgent = PushOptions::new().with_priority(Priority::High);
    /// assert_eq!(urgent.priority, Priority::High);
    /// ```
    #[must_use]
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Makes the job unique by `key` for at most `ttl`: while a job of this
    /// topic with the key is scheduled, waiting or running, another push
    /// with it stores nothing and fails with
    /// [`Error::Duplicate`] carrying the first job's id
    /// ([`Error::duplicate_of`]). The key is given back when the job is
    /// settled (acknowledged, dead-lettered or dropped), or when `ttl`
    /// ends, whichever comes first; [`PushOptions::with_unique`] with
    /// [`UniqueKey::until_ttl`] keeps it for the whole ttl. Needs
    /// [`Capability::ExclusiveClaim`](crate::spi::Capability::ExclusiveClaim).
    ///
    /// ```no_run
    /// # async fn demo(client: &dyn ezmq_core::MqClient) -> ezmq_core::Result<()> {
    /// use std::time::Duration;
    /// use ezmq_core::{Error, PushOptions};
    ///
    /// let once = || PushOptions::new().with_unique_key("welcome:user-42", Duration::from_secs(3600));
    /// let first = client.push_with("mail", "hi".into(), once()).await?;
    /// match client.push_with("mail", "hi".into(), once()).await {
    ///     Err(Error::Duplicate { existing, .. }) => assert_eq!(existing, Some(first)),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_unique_key(self, key: impl Into<String>, ttl: Duration) -> Self {
        self.with_unique(UniqueKey::new(key, ttl))
    }

    /// Sets [`PushOptions::unique`].
    #[must_use]
    pub fn with_unique(mut self, unique: UniqueKey) -> Self {
        self.unique = Some(unique);
        self
    }

    /// Keeps an existing job's id (to push a dead letter back, say). Unlike
    /// [`PushOptions::with_message_id`] it is never deduplicated.
    #[must_use]
    pub fn with_job_id(mut self, id: &JobId) -> Self {
        self.job_id = Some(id.as_str().to_owned());
        self
    }

    /// The id set by [`PushOptions::with_job_id`].
    pub fn job_id(&self) -> Option<&str> {
        self.job_id.as_deref()
    }

    /// The job id [`JobMeta::stamp`](crate::JobMeta::stamp) wrote into
    /// these options' [`MESSAGE_ID_HEADER`](crate::MESSAGE_ID_HEADER): what
    /// a [`Backend`](crate::spi::Backend) returns for the push. `None`
    /// before the stamp. Reading it copies nothing when the header still
    /// holds the stamped id.
    ///
    /// ```
    /// use ezmq_core::{JobMeta, PushOptions};
    ///
    /// let mut options = PushOptions::new();
    /// assert!(options.stamped_id().is_none());
    /// let id = JobMeta::stamp(&mut options);
    /// assert_eq!(options.stamped_id(), Some(id));
    /// ```
    pub fn stamped_id(&self) -> Option<JobId> {
        match self.headers.get_shared(crate::MESSAGE_ID_HEADER) {
            Some(shared) => Some(JobId::from_shared(Arc::clone(shared))),
            None => self.headers.get(crate::MESSAGE_ID_HEADER).map(JobId::new),
        }
    }

    /// Attaches options for one backend (for instance
    /// `ezmq_disque::DisquePushOptions`); other backends ignore them.
    #[must_use]
    pub fn with_backend_options<T: Any + Send + Sync>(mut self, options: T) -> Self {
        self.backend = Some(Arc::new(options));
        self
    }

    /// The backend options of type `T`, if any were attached.
    pub fn backend_options<T: Any>(&self) -> Option<&T> {
        self.backend.as_deref()?.downcast_ref::<T>()
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
        // Ten years: beyond it, time arithmetic on the broker side overflows.
        const MAX: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
        if self.delay.is_some_and(|d| d > MAX) || self.ttl.is_some_and(|t| t > MAX) {
            return Err(Error::invalid_option(
                "delay",
                "delays and ttls are limited to ten years",
            ));
        }
        if let Some(id) = &self.message_id {
            if id.is_empty() || id.len() > 200 {
                return Err(Error::invalid_option(
                    "message_id",
                    "must be 1 to 200 bytes long",
                ));
            }
        }
        if self.priority != Priority::Normal && self.delay.is_some_and(|d| d > MAX_PRIORITY_DELAY) {
            return Err(Error::invalid_option(
                "delay",
                "a prioritized job's delay is at most 29 days (its topic's lanes are marked for 30)",
            ));
        }
        if self.max_attempts == Some(0) {
            return Err(Error::invalid_option(
                "max_attempts",
                "must be at least 1 (1: never retried)",
            ));
        }
        if let Some(backoff) = &self.backoff {
            backoff.validate()?;
        }
        if let Some(unique) = &self.unique {
            unique.validate()?;
        }
        for (name, _) in self.headers.iter() {
            if name.is_empty() {
                return Err(Error::invalid_option("headers", "a header name is empty"));
            }
            if name.starts_with(RESERVED_HEADER_PREFIX) {
                return Err(Error::invalid_option(
                    "headers",
                    format!("header {name:?}: names starting with `ezmq-` are reserved"),
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
    fn rejects_impossible_combinations() {
        let s = Duration::from_secs;
        assert!(PushOptions::new().validate().is_ok());
        assert!(PushOptions::new()
            .with_delay(s(10))
            .with_ttl(s(10))
            .validate()
            .is_err());
        assert!(PushOptions::new()
            .with_header("ezmq-attempt", "1")
            .validate()
            .is_err());
        assert!(PushOptions::new().with_message_id("").validate().is_err());
        assert!(PushOptions::new()
            .with_delay(Duration::MAX)
            .validate()
            .is_err());
    }

    #[test]
    fn backend_options_are_typed() {
        #[derive(Debug, PartialEq)]
        struct Replicate(u32);
        let opts = PushOptions::new().with_backend_options(Replicate(3));
        assert_eq!(opts.backend_options::<Replicate>(), Some(&Replicate(3)));
        assert_eq!(opts.backend_options::<u32>(), None);
    }
}
