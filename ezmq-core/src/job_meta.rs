//! The job model: a stable id and the metadata core writes once, at the
//! push, and every backend carries unchanged.
//!
//! Every push gets a [`JobId`] before it reaches the broker: the
//! producer's own ([`PushOptions::with_message_id`]), else a fresh
//! UUIDv7, sortable by creation time. Core writes it, with the rest of the
//! [`JobMeta`], into reserved headers; a backend stores headers as they are
//! and reads the id back from them, so one job keeps one id through delay,
//! retry, dead letter and requeue on every broker.
//!
//! | header | value | written when |
//! |---|---|---|
//! | `ezmq-message-id` | the job id | always |
//! | `ezmq-enqueued-at` | ms since the Unix epoch | the id is the producer's (a UUIDv7 carries its own time) |
//! | `ezmq-run-at` | ms since the Unix epoch | the push has a delay |
//! | `ezmq-max-attempts` | attempts, at least 1 | [`PushOptions::with_max_attempts`] |
//! | `ezmq-backoff` | `<initial ms>,<max ms>` | [`PushOptions::with_backoff`] |
//! | `ezmq-unique-key` | the unique key | [`PushOptions::with_unique_key`] |
//! | `ezmq-unique-release` | `ttl` | the key is kept until its ttl ([`UniqueKey::until_ttl`](crate::UniqueKey::until_ttl)) |
//! | `ezmq-priority` | `high` or `low` | [`PushOptions::with_priority`], not `Normal` |
//! | `ezmq-reserved-start` | `<attempt>:<ms since the Unix epoch>` | a per-key rate limit deferred the job ([`ConsumeOptions::with_rate_limit_by`](crate::ConsumeOptions::with_rate_limit_by)) |
//!
//! A job pushed by another client (a raw Disque `ADDJOB`, say) has none of
//! them: its id is the broker's, and the listener's policy applies.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::consume_options::Backoff;
use crate::headers::{Headers, MESSAGE_ID_HEADER};
use crate::job::{Job, JobId};
use crate::priority::{Priority, PRIORITY_HEADER};
use crate::push_options::PushOptions;

/// Header with the time a job was first pushed, when its id does not
/// carry it (a producer-chosen id).
pub const ENQUEUED_AT_HEADER: &str = "ezmq-enqueued-at";
/// Header with the time a delayed job becomes deliverable.
pub const RUN_AT_HEADER: &str = "ezmq-run-at";
/// Header with a job's own attempt limit
/// ([`PushOptions::with_max_attempts`]).
pub const MAX_ATTEMPTS_HEADER: &str = "ezmq-max-attempts";
/// Header with a job's own retry backoff ([`PushOptions::with_backoff`]).
pub const BACKOFF_HEADER: &str = "ezmq-backoff";
/// Header with the start a per-key rate limit reserved for a deferred
/// job (`<attempt>:<ms since the Unix epoch>`), written by
/// [`Settle::defer`](crate::spi::Settle::defer): the job starts when it
/// comes back as that attempt, without reserving again.
pub const RESERVATION_HEADER: &str = "ezmq-reserved-start";

/// What ezmq knows about a job beyond its body: read from the headers core
/// wrote at the push (see the [module docs](self)).
///
/// ```
/// use std::time::Duration;
/// use ezmq_core::{Job, JobId, JobMeta, PushOptions, Topic};
///
/// let mut options = PushOptions::new().with_max_attempts(10);
/// let id = JobMeta::stamp(&mut options);
/// // ...the broker delivers the job with the headers it was given:
/// let job = Job::new(id.clone(), Topic::new("t").unwrap(), "x".into())
///     .with_headers(options.headers.clone());
/// let meta = job.meta();
/// assert_eq!(meta.id, id);
/// assert_eq!(meta.max_attempts, Some(10));
/// assert!(meta.enqueued_at.is_some());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobMeta {
    /// The job's id, the same on every delivery.
    pub id: JobId,
    /// This delivery's attempt (1-based).
    pub attempt: u32,
    /// The job's own attempt limit; `None`: the listener's.
    pub max_attempts: Option<u32>,
    /// The job's own retry backoff; `None`: the listener's.
    pub backoff: Option<Backoff>,
    /// When the job was first pushed, when known.
    pub enqueued_at: Option<SystemTime>,
    /// When a delayed job became (or becomes) deliverable.
    pub scheduled_at: Option<SystemTime>,
    /// The job's priority ([`PushOptions::with_priority`]): the lane it
    /// waits in, kept through delay, retry and requeue.
    pub priority: Priority,
}

impl JobMeta {
    /// The metadata of a delivered job.
    pub fn of(job: &Job) -> Self {
        Self::read(job.headers(), job.id().clone(), job.attempt())
    }

    /// The metadata in `headers` (a dead-letter record's, say): the id of
    /// the `ezmq-message-id` header (empty when there is none), attempt 1.
    pub fn from_headers(headers: &Headers) -> Self {
        let id = JobId::new(headers.get(MESSAGE_ID_HEADER).unwrap_or_default());
        Self::read(headers, id, 1)
    }

    fn read(headers: &Headers, id: JobId, attempt: u32) -> Self {
        JobMeta {
            enqueued_at: id
                .created_at()
                .or_else(|| time_header(headers, ENQUEUED_AT_HEADER)),
            id,
            attempt,
            max_attempts: headers
                .get(MAX_ATTEMPTS_HEADER)
                .and_then(|v| v.parse().ok())
                .filter(|n| *n >= 1),
            backoff: headers.get(BACKOFF_HEADER).and_then(parse_backoff),
            scheduled_at: time_header(headers, RUN_AT_HEADER),
            priority: Priority::of_headers(headers),
        }
    }

    /// Gives a push its id and writes its metadata into `options.headers`
    /// (the producer pipeline does this for every push; call it yourself
    /// only to build headers for a [`Backend`](crate::spi::Backend) by
    /// hand). The id is, in this order: one already stamped, the
    /// producer's message id, a new UUIDv7.
    pub fn stamp(options: &mut PushOptions) -> JobId {
        Self::stamp_at(options, SystemTime::now())
    }

    /// [`stamp`](Self::stamp) with the clock already read: a batch reads
    /// it once for all its jobs (their ids still increase, by the UUIDv7
    /// counter).
    pub(crate) fn stamp_at(options: &mut PushOptions, now: SystemTime) -> JobId {
        if let Some(id) = options.stamped_id() {
            return id;
        }
        let given = options
            .message_id
            .as_deref()
            .or(options.job_id())
            .map(str::to_owned);
        let id = match given {
            Some(given) => {
                options
                    .headers
                    .insert_static(ENQUEUED_AT_HEADER, millis(now).to_string());
                JobId::new(given)
            }
            None => JobId::generate_at(now),
        };
        options
            .headers
            .insert_shared(MESSAGE_ID_HEADER, Arc::clone(id.shared()));
        if let Some(delay) = options.delay.filter(|d| !d.is_zero()) {
            let at = now.checked_add(delay).unwrap_or(now);
            options
                .headers
                .insert_static(RUN_AT_HEADER, millis(at).to_string());
        }
        if let Some(unique) = &options.unique {
            unique.stamp(&mut options.headers);
        }
        if options.priority != Priority::Normal {
            options
                .headers
                .insert_static(PRIORITY_HEADER, options.priority.as_str().to_owned());
        }
        if let Some(max) = options.max_attempts {
            options
                .headers
                .insert_static(MAX_ATTEMPTS_HEADER, max.to_string());
        }
        if let Some(backoff) = &options.backoff {
            options.headers.insert_static(
                BACKOFF_HEADER,
                format!(
                    "{},{}",
                    backoff.initial.as_millis(),
                    backoff.max.as_millis()
                ),
            );
        }
        id
    }
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn time_header(headers: &Headers, name: &str) -> Option<SystemTime> {
    let ms: u64 = headers.get(name)?.parse().ok()?;
    UNIX_EPOCH.checked_add(Duration::from_millis(ms))
}

fn parse_backoff(value: &str) -> Option<Backoff> {
    let (initial, max) = value.split_once(',')?;
    Some(Backoff {
        initial: Duration::from_millis(initial.trim().parse().ok()?),
        max: Duration::from_millis(max.trim().parse().ok()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic::Topic;

    fn delivered(options: &PushOptions, id: &JobId) -> Job {
        Job::new(id.clone(), Topic::new("t").unwrap(), "x".into())
            .with_headers(options.headers.clone())
    }

    #[test]
    fn generated_ids_are_uuid_v7_and_sort_by_time() {
        let a = JobMeta::stamp(&mut PushOptions::new());
        let b = JobMeta::stamp(&mut PushOptions::new());
        assert!(a < b, "{a} then {b}");
        assert!(a.created_at().is_some());
        let mut options = PushOptions::new();
        let id = JobMeta::stamp(&mut options);
        assert_eq!(options.headers.len(), 1, "a plain push carries only its id");
        assert_eq!(options.headers.get(MESSAGE_ID_HEADER), Some(id.as_str()));
    }

    #[test]
    fn a_producer_id_wins_and_stamping_twice_keeps_the_first_id() {
        let mut options = PushOptions::new().with_message_id("order-42");
        let id = JobMeta::stamp(&mut options);
        assert_eq!(id.as_str(), "order-42");
        assert_eq!(JobMeta::stamp(&mut options), id);
        let meta = delivered(&options, &id).meta();
        assert!(meta.enqueued_at.is_some());
        assert_eq!(meta.max_attempts, None);
    }

    #[test]
    fn policy_overrides_and_schedule_round_trip() {
        let backoff = Backoff {
            initial: Duration::from_millis(250),
            max: Duration::from_secs(4),
        };
        let mut options = PushOptions::new()
            .with_delay(Duration::from_secs(60))
            .with_max_attempts(7)
            .with_backoff(backoff.initial, backoff.max);
        let id = JobMeta::stamp(&mut options);
        let meta = delivered(&options, &id).with_attempt(3).meta();
        assert_eq!(meta.attempt, 3);
        assert_eq!(meta.max_attempts, Some(7));
        assert_eq!(meta.backoff, Some(backoff));
        let scheduled = meta.scheduled_at.unwrap();
        let enqueued = meta.enqueued_at.unwrap();
        let ahead = scheduled.duration_since(enqueued).unwrap();
        assert!(ahead >= Duration::from_secs(59), "{ahead:?}");
    }

    #[test]
    fn foreign_jobs_have_only_the_broker_id() {
        let job = Job::new(JobId::new("D-1"), Topic::new("t").unwrap(), "x".into());
        let meta = job.meta();
        assert_eq!(meta.id.as_str(), "D-1");
        assert_eq!((meta.max_attempts, meta.enqueued_at), (None, None));
    }
}
