//! Jobs by id and state: rows of the jobs table, their state read off
//! `leased`, `visible_at` and `attempt` (see `sql.rs`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use ezmq_core::spi::{Cancelled, JobInfo, JobState, JobStore};
use ezmq_core::{JobId, Result, Topic};
use sqlx::postgres::PgRow;

use crate::backend::PostgresBackend;
use crate::error::column;
use crate::receive::job;
use crate::stats::count;

/// The index of `state` in [`JobState::ALL`] (the statements' order).
fn index(state: JobState) -> usize {
    JobState::ALL.iter().position(|s| *s == state).unwrap_or(0)
}

/// A [`JobInfo`] from a row of `id, body, headers, attempt, state, due ms`.
fn info(topic: &Topic, row: &PgRow) -> Result<JobInfo> {
    let state: i32 = column(row, 4, "job store")?;
    let state = usize::try_from(state)
        .ok()
        .and_then(|i| JobState::ALL.get(i).copied())
        .unwrap_or(JobState::Ready);
    let due_ms: i64 = column(row, 5, "job store")?;
    let due_at = matches!(state, JobState::Scheduled | JobState::Retrying)
        .then(|| UNIX_EPOCH + Duration::from_millis(u64::try_from(due_ms).unwrap_or(0)));
    let headers: String = column(row, 2, "job store")?;
    let job = job(
        topic,
        column(row, 0, "job store")?,
        column(row, 1, "job store")?,
        &headers,
        column(row, 3, "job store")?,
    );
    Ok(JobInfo::new(job, state, due_at))
}

#[async_trait]
impl JobStore for PostgresBackend {
    async fn job(&self, topic: &Topic, id: &JobId) -> Result<Option<JobInfo>> {
        let inner = &self.inner;
        let row = inner
            .timed(
                "job",
                sqlx::query(&inner.sql.job)
                    .bind(topic.as_str())
                    .bind(id.as_str())
                    .fetch_optional(&inner.pool),
            )
            .await?;
        row.map(|row| info(topic, &row)).transpose()
    }

    async fn jobs(
        &self,
        topic: &Topic,
        state: JobState,
        after: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<JobInfo>> {
        let inner = &self.inner;
        let rows = inner
            .timed(
                "jobs",
                sqlx::query(&inner.sql.jobs[index(state)])
                    .bind(topic.as_str())
                    .bind(after.map(JobId::as_str))
                    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                    .fetch_all(&inner.pool),
            )
            .await?;
        rows.iter().map(|row| info(topic, row)).collect()
    }

    async fn count(&self, topic: &Topic, state: JobState) -> Result<u64> {
        count(self, &self.inner.sql.count[index(state)], topic).await
    }

    /// One `DELETE` that spares a running row: a fetch that took the row
    /// first makes it running before the `DELETE` looks again, so a job is
    /// never both delivered and cancelled.
    async fn cancel(&self, topic: &Topic, id: &JobId) -> Result<Cancelled> {
        let inner = &self.inner;
        let done = inner
            .timed(
                "cancel",
                sqlx::query(&inner.sql.cancel)
                    .bind(topic.as_str())
                    .bind(id.as_str())
                    .execute(&inner.pool),
            )
            .await?;
        if done.rows_affected() > 0 {
            return Ok(Cancelled::Removed);
        }
        let running: Option<i32> = inner
            .timed(
                "cancel",
                sqlx::query_scalar(&inner.sql.exists)
                    .bind(topic.as_str())
                    .bind(id.as_str())
                    .fetch_optional(&inner.pool),
            )
            .await?;
        Ok(match running {
            Some(_) => Cancelled::Running,
            None => Cancelled::NotFound,
        })
    }

    async fn promote(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        let inner = &self.inner;
        let done = inner
            .timed(
                "promote",
                sqlx::query(&inner.sql.promote)
                    .bind(topic.as_str())
                    .bind(id.as_str())
                    .execute(&inner.pool),
            )
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn reschedule(&self, topic: &Topic, id: &JobId, at: SystemTime) -> Result<bool> {
        let inner = &self.inner;
        // Milliseconds rounded up: never before `at`.
        let at_ms = at
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros().div_ceil(1000))
            .unwrap_or(0) as f64;
        let done = inner
            .timed(
                "reschedule",
                sqlx::query(&inner.sql.reschedule)
                    .bind(topic.as_str())
                    .bind(id.as_str())
                    .bind(at_ms)
                    .execute(&inner.pool),
            )
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
