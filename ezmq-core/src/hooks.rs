//! Lifecycle hooks of a listener: alerting on retries and dead letters.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::job::Job;

/// A failed attempt, as hooks see it.
#[derive(Debug)]
#[non_exhaustive]
pub struct FailedAttempt<'a> {
    /// The job.
    pub job: &'a Job,
    /// The attempt that failed (1-based).
    pub attempt: u32,
    /// The error (or panic) message.
    pub error: &'a str,
    /// For a retry, the wait before the next attempt.
    pub retry_in: Option<Duration>,
    /// Whether the error was [`Permanent`](crate::Permanent).
    pub permanent: bool,
}

type Hook = Arc<dyn Fn(&FailedAttempt<'_>) + Send + Sync>;

/// Callbacks a listener runs when a job fails: before it is retried and
/// when it goes to the dead-letter topic (for alerting and metrics). They
/// run on the job's task: keep them quick.
///
/// ```
/// use ezmq_core::{ConsumeOptions, ListenerHooks};
///
/// let options = ConsumeOptions::new().with_hooks(
///     ListenerHooks::new()
///         .on_retry(|failed| eprintln!("retrying {} after {}", failed.job.id(), failed.error))
///         .on_dead_letter(|failed| eprintln!("ALERT: {} failed for good", failed.job.id())),
/// );
/// # let _ = options;
/// ```
#[derive(Clone, Default)]
pub struct ListenerHooks {
    retry: Option<Hook>,
    dead_letter: Option<Hook>,
}

impl ListenerHooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `f` before a failed job is handed back for a retry.
    #[must_use]
    pub fn on_retry(mut self, f: impl Fn(&FailedAttempt<'_>) + Send + Sync + 'static) -> Self {
        self.retry = Some(Arc::new(f));
        self
    }

    /// Runs `f` when a job failed for good (dead-lettered or dropped).
    #[must_use]
    pub fn on_dead_letter(
        mut self,
        f: impl Fn(&FailedAttempt<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.dead_letter = Some(Arc::new(f));
        self
    }

    pub(crate) fn retried(&self, failed: &FailedAttempt<'_>) {
        if let Some(hook) = &self.retry {
            hook(failed);
        }
    }

    pub(crate) fn dead_lettered(&self, failed: &FailedAttempt<'_>) {
        if let Some(hook) = &self.dead_letter {
            hook(failed);
        }
    }
}

impl fmt::Debug for ListenerHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerHooks")
            .field("on_retry", &self.retry.is_some())
            .field("on_dead_letter", &self.dead_letter.is_some())
            .finish()
    }
}

impl PartialEq for ListenerHooks {
    fn eq(&self, other: &Self) -> bool {
        fn same(a: &Option<Hook>, b: &Option<Hook>) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
        }
        same(&self.retry, &other.retry) && same(&self.dead_letter, &other.dead_letter)
    }
}

impl Eq for ListenerHooks {}
