//! The one retry decision: how a handler run's outcome settles its job,
//! given the attempt and the listener's policy. The listener acts on it
//! and telemetry records it, so the two cannot disagree.

use crate::consume_options::ConsumeOptions;
use crate::telemetry::Settle;

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
    pub(super) fn of(outcome: Outcome, attempt: u32, options: &ConsumeOptions) -> Self {
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

    fn failed(permanent: bool) -> Outcome {
        Outcome::Failed {
            message: "boom".into(),
            permanent,
        }
    }

    #[test]
    fn retries_until_the_last_attempt_then_dead_letters() {
        let options = ConsumeOptions::new().with_max_attempts(3);
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
        let options = ConsumeOptions::new().with_max_attempts(5);
        let decision = Decision::of(failed(true), 1, &options);
        assert_eq!(decision.settle(), Settle::DeadLetter { permanent: true });
    }

    #[test]
    fn success_abort_and_at_most_once() {
        let options = ConsumeOptions::new();
        assert_eq!(Decision::of(Outcome::Done, 1, &options), Decision::Ack);
        assert_eq!(
            Decision::of(Outcome::Aborted, 9, &options),
            Decision::Release
        );
        let once = ConsumeOptions::new().with_at_most_once(true);
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
