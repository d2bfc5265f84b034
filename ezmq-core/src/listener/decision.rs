//! The one retry decision: how a handler run's outcome settles its job,
//! given the attempt and the listener's policy. The listener acts on it
//! and telemetry records it, so the two cannot disagree.

use crate::consume_options::{Backoff, ConsumeOptions};
use crate::job::Job;
use crate::job_meta::{BACKOFF_HEADER, MAX_ATTEMPTS_HEADER};
use crate::telemetry::Settle;

/// The retry policy one job runs under: the listener's, with the job's own
/// overrides from its [`JobMeta`](crate::JobMeta) (attempt limit, backoff).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Policy {
    pub(super) max_attempts: u32,
    pub(super) backoff: Backoff,
    pub(super) at_most_once: bool,
}

impl Policy {
    /// `job`'s policy under a listener with `options`. A job without
    /// overrides (most) costs two header lookups.
    pub(super) fn of(job: &Job, options: &ConsumeOptions) -> Self {
        let headers = job.headers();
        let overridden =
            headers.get(MAX_ATTEMPTS_HEADER).is_some() || headers.get(BACKOFF_HEADER).is_some();
        let meta = overridden.then(|| job.meta());
        let meta = meta.as_ref();
        Policy {
            max_attempts: meta
                .and_then(|m| m.max_attempts)
                .unwrap_or(options.max_attempts),
            backoff: meta
                .and_then(|m| m.backoff.clone())
                .unwrap_or_else(|| options.backoff.clone()),
            at_most_once: options.at_most_once,
        }
    }
}

/// How a handler run ended.
#[derive(Debug)]
pub(super) enum Outcome {
    /// `Ok(())`.
    Done,
    /// An error or a panic.
    Failed { message: String, permanent: bool },
    /// Still running at the end of a stop's grace period.
    Aborted,
}

/// What happens to the job after its handler ran.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Decision {
    /// Succeeded: acknowledge.
    Ack,
    /// Aborted at the end of a stop's grace period: give it back.
    Release,
    /// Failed, with attempts left: hand it back for another attempt after
    /// the backoff.
    Retry { message: String },
    /// Failed for good (permanent, or out of attempts): dead-letter it.
    DeadLetter { message: String, permanent: bool },
    /// At most once: it was settled before it ran; `failure` is the error
    /// it ended with, if any (never retried).
    Taken { failure: Option<String> },
}

impl Decision {
    /// The decision for `outcome` of delivery `attempt` (1-based) under
    /// `options`.
    pub(super) fn of(outcome: Outcome, attempt: u32, options: &Policy) -> Self {
        match outcome {
            Outcome::Done if options.at_most_once => Decision::Taken { failure: None },
            Outcome::Failed { message, .. } if options.at_most_once => Decision::Taken {
                failure: Some(message),
            },
            Outcome::Done => Decision::Ack,
            Outcome::Aborted => Decision::Release,
            Outcome::Failed { message, permanent }
                if permanent || attempt >= options.max_attempts =>
            {
                Decision::DeadLetter { message, permanent }
            }
            Outcome::Failed { message, .. } => Decision::Retry { message },
        }
    }

    /// How telemetry records it.
    pub(super) fn settle(&self) -> Settle {
        match self {
            Decision::Ack => Settle::Ack,
            Decision::Release => Settle::Release,
            Decision::Retry { .. } => Settle::Retry,
            Decision::DeadLetter { permanent, .. } => Settle::DeadLetter {
                permanent: *permanent,
            },
            Decision::Taken { failure } => Settle::Taken {
                failed: failure.is_some(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobId;
    use crate::topic::Topic;
    use crate::{JobMeta, PushOptions};
    use std::time::Duration;

    fn policy(options: &ConsumeOptions) -> Policy {
        let job = Job::new(JobId::new("j"), Topic::new("t").unwrap(), "x".into());
        Policy::of(&job, options)
    }

    #[test]
    fn a_job_s_own_policy_overrides_the_listener_s() {
        let mut push = PushOptions::new()
            .without_retry()
            .with_backoff(Duration::from_secs(1), Duration::from_secs(2));
        let id = JobMeta::stamp(&mut push);
        let job = Job::new(id, Topic::new("t").unwrap(), "x".into()).with_headers(push.headers);
        let listener = ConsumeOptions::new().with_max_attempts(5);
        let own = Policy::of(&job, &listener);
        assert_eq!(own.max_attempts, 1);
        assert_eq!(own.backoff.initial, Duration::from_secs(1));
        assert_eq!(
            Decision::of(failed(false), 1, &own).settle(),
            Settle::DeadLetter { permanent: false }
        );
        assert_eq!(policy(&listener).max_attempts, 5);
    }

    fn failed(permanent: bool) -> Outcome {
        Outcome::Failed {
            message: "boom".into(),
            permanent,
        }
    }

    #[test]
    fn retries_until_the_last_attempt_then_dead_letters() {
        let options = policy(&ConsumeOptions::new().with_max_attempts(3));
        let retry = Decision::Retry {
            message: "boom".into(),
        };
        assert_eq!(Decision::of(failed(false), 1, &options), retry);
        assert_eq!(Decision::of(failed(false), 2, &options), retry);
        let dead = Decision::of(failed(false), 3, &options);
        assert_eq!(
            dead,
            Decision::DeadLetter {
                message: "boom".into(),
                permanent: false
            }
        );
        assert_eq!(dead.settle(), Settle::DeadLetter { permanent: false });
    }

    #[test]
    fn permanent_errors_skip_the_retries() {
        let options = policy(&ConsumeOptions::new().with_max_attempts(5));
        let decision = Decision::of(failed(true), 1, &options);
        assert_eq!(decision.settle(), Settle::DeadLetter { permanent: true });
    }

    #[test]
    fn success_abort_and_at_most_once() {
        let options = policy(&ConsumeOptions::new());
        assert_eq!(Decision::of(Outcome::Done, 1, &options), Decision::Ack);
        assert_eq!(
            Decision::of(Outcome::Aborted, 9, &options),
            Decision::Release
        );
        let once = policy(&ConsumeOptions::new().with_at_most_once(true));
        assert_eq!(
            Decision::of(failed(false), 1, &once).settle(),
            Settle::Taken { failed: true }
        );
        assert_eq!(
            Decision::of(Outcome::Done, 1, &once).settle(),
            Settle::Taken { failed: false }
        );
    }
}
