//! The in-memory broker's job store: jobs by id and state, cancel,
//! promote (a scan of the topic's queue: it is small and in memory).

use std::time::SystemTime;

use async_trait::async_trait;
use ezmq_core::spi::{Cancelled, JobInfo, JobState, JobStore, Source};
use ezmq_core::{JobId, Result, Topic};
use tokio::time::Instant;

use super::queue::{Message, Queue};
use super::MemoryBackend;

/// `message` of `topic` as a [`JobInfo`]; `due` on the broker's clock.
fn info(topic: &Topic, message: &Message, state: JobState, due: Option<Instant>) -> JobInfo {
    let now = Instant::now();
    let due_at = due.map(|due| SystemTime::now() + due.saturating_duration_since(now));
    JobInfo::new(message.job(topic), state, due_at)
}

impl MemoryBackend {
    /// Runs `f` on the queue of `topic` (after a sweep), if there is one.
    fn with_queue<T>(&self, topic: &Topic, f: impl FnOnce(&mut Queue, Instant) -> T) -> Option<T> {
        let now = Instant::now();
        let mut state = self.state();
        let queue = state.existing_queue(&Source::Topic(topic.clone()))?;
        queue.sweep(now);
        Some(f(queue, now))
    }
}

#[async_trait]
impl JobStore for MemoryBackend {
    async fn job(&self, topic: &Topic, id: &JobId) -> Result<Option<JobInfo>> {
        self.ensure_open()?;
        Ok(self
            .with_queue(topic, |queue, now| {
                JobState::ALL.into_iter().find_map(|state| {
                    queue
                        .in_state(state, now)
                        .into_iter()
                        .find(|(m, _)| &m.id == id)
                        .map(|(m, due)| info(topic, m, state, due))
                })
            })
            .flatten())
    }

    async fn jobs(
        &self,
        topic: &Topic,
        state: JobState,
        after: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<JobInfo>> {
        self.ensure_open()?;
        Ok(self
            .with_queue(topic, |queue, now| {
                let mut found = queue.in_state(state, now);
                found.retain(|(m, _)| after.is_none_or(|after| &m.id > after));
                found.sort_by(|(a, _), (b, _)| a.id.cmp(&b.id));
                found
                    .into_iter()
                    .take(limit)
                    .map(|(m, due)| info(topic, m, state, due))
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn count(&self, topic: &Topic, state: JobState) -> Result<u64> {
        self.ensure_open()?;
        Ok(self
            .with_queue(topic, |queue, now| queue.in_state(state, now).len())
            .map_or(0, |n| u64::try_from(n).unwrap_or(u64::MAX)))
    }

    async fn cancel(&self, topic: &Topic, id: &JobId) -> Result<Cancelled> {
        self.ensure_open()?;
        Ok(self
            .with_queue(topic, |queue, _| queue.cancel(id))
            .unwrap_or(Cancelled::NotFound))
    }

    async fn promote(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        self.ensure_open()?;
        Ok(self
            .with_queue(topic, |queue, _| queue.promote(id))
            .unwrap_or(false))
    }

    async fn reschedule(&self, topic: &Topic, id: &JobId, at: SystemTime) -> Result<bool> {
        self.ensure_open()?;
        // On the broker's clock: as far from now as `at` is (rounded up).
        let ahead = at
            .duration_since(SystemTime::now())
            .map(|d| d + std::time::Duration::from_millis(1))
            .unwrap_or_default();
        Ok(self
            .with_queue(topic, |queue, now| queue.reschedule(id, now + ahead))
            .unwrap_or(false))
    }
}
