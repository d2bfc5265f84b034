//! Finding jobs by id and state: what job control, the command line and a
//! dashboard build on.

use std::fmt;
use std::time::SystemTime;

use async_trait::async_trait;

use crate::error::Result;
use crate::job::{Job, JobId};
use crate::topic::Topic;

/// Where a job of a topic is in its life.
///
/// A dead job is a [`JobState::Ready`] one of its dead-letter topic (with
/// the same id); a finished or cancelled job is no longer found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobState {
    /// Pushed with a delay that has not ended.
    Scheduled,
    /// Failed, waiting for its retry backoff to end.
    Retrying,
    /// Waiting to be delivered.
    Ready,
    /// Delivered to a consumer that has not settled it.
    Running,
}

impl JobState {
    /// Every state, in a job's order.
    pub const ALL: [JobState; 4] = [
        JobState::Scheduled,
        JobState::Retrying,
        JobState::Ready,
        JobState::Running,
    ];

    /// The state's name: `scheduled`, `retrying`, `ready`, `running`.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Scheduled => "scheduled",
            JobState::Retrying => "retrying",
            JobState::Ready => "ready",
            JobState::Running => "running",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A job found in a [`JobStore`]: the job as its next delivery will see
/// it, its state, and when it comes due (scheduled and retrying jobs).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct JobInfo {
    /// The job (id, topic, body, headers, next attempt).
    pub job: Job,
    /// Where it is.
    pub state: JobState,
    /// When a scheduled or retrying job becomes ready.
    pub due_at: Option<SystemTime>,
}

impl JobInfo {
    /// Describes `job` in `state`.
    pub fn new(job: Job, state: JobState, due_at: Option<SystemTime>) -> Self {
        JobInfo { job, state, due_at }
    }
}

/// What [`JobStore::cancel`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cancelled {
    /// The job was scheduled, retrying or ready, and is gone: it will not
    /// run.
    Removed,
    /// The job is running: a handler has it, and it was left alone (it is
    /// settled as its handler ends).
    Running,
    /// No such job (finished, cancelled, expired, or never pushed).
    NotFound,
}

/// Jobs by id and state ([`Capability::JobStore`](super::Capability::JobStore)):
/// each backend keeps what it needs to find a job by its id.
///
/// Listing is by id, so oldest first for ids core generated (UUIDv7),
/// and paged with `after` (the last id of the previous page).
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Job `id` of `topic`, wherever it is; `None` when it is not found.
    async fn job(&self, topic: &Topic, id: &JobId) -> Result<Option<JobInfo>>;

    /// Up to `limit` jobs of `topic` in `state`, by id, after `after`.
    async fn jobs(
        &self,
        topic: &Topic,
        state: JobState,
        after: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<JobInfo>>;

    /// How many jobs of `topic` are in `state`.
    async fn count(&self, topic: &Topic, state: JobState) -> Result<u64>;

    /// Removes job `id` of `topic` unless it is running.
    async fn cancel(&self, topic: &Topic, id: &JobId) -> Result<Cancelled>;

    /// Makes a scheduled or retrying job ready now; false when it is not
    /// scheduled or retrying.
    async fn promote(&self, topic: &Topic, id: &JobId) -> Result<bool>;

    /// Moves a scheduled or retrying job's due time to `at` (a time past
    /// makes it due at once, as [`JobStore::promote`]); false when it is
    /// not scheduled or retrying. Never early: it is not delivered before
    /// `at`.
    async fn reschedule(&self, topic: &Topic, id: &JobId, at: SystemTime) -> Result<bool>;
}
