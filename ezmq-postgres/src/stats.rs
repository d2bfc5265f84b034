//! Queue lengths and peeking, counted in the jobs table.

use async_trait::async_trait;
use ezmq_core::spi::{Peek, QueueStats};
use ezmq_core::{Job, Result, Topic};

use crate::backend::PostgresBackend;
use crate::error::column;
use crate::receive::job;

#[async_trait]
impl QueueStats for PostgresBackend {
    /// Jobs due now (a job whose lease ended counts: it is taken again),
    /// not past their ttl.
    async fn queue_len(&self, topic: &Topic) -> Result<u64> {
        count(self, &self.inner.sql.queue_len, topic).await
    }

    /// Jobs fetched and not settled whose lease has not ended.
    async fn in_flight(&self, topic: &Topic) -> Result<Option<u64>> {
        count(self, &self.inner.sql.in_flight, topic)
            .await
            .map(Some)
    }

    /// The queues holding jobs (waiting, scheduled, in flight), by a
    /// loose scan of the jobs table's queue index.
    async fn topics(&self) -> Result<Option<Vec<Topic>>> {
        let inner = &self.inner;
        let names: Vec<String> = inner
            .timed(
                "topics",
                sqlx::query_scalar(&inner.sql.topics).fetch_all(&inner.pool),
            )
            .await?;
        Ok(Some(
            names
                .into_iter()
                .filter_map(|name| Topic::new(name).ok())
                .collect(),
        ))
    }
}

/// Runs a `count(*)` statement on `topic`.
pub(crate) async fn count(backend: &PostgresBackend, sql: &str, topic: &Topic) -> Result<u64> {
    let inner = &backend.inner;
    let n: i64 = inner
        .timed(
            "count",
            sqlx::query_scalar(sql)
                .bind(topic.as_str())
                .fetch_one(&inner.pool),
        )
        .await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

#[async_trait]
impl Peek for PostgresBackend {
    /// The jobs the next fetches take, in their order.
    async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>> {
        let inner = &self.inner;
        let rows = inner
            .timed(
                "peek",
                sqlx::query(&inner.sql.peek)
                    .bind(topic.as_str())
                    .bind(i64::try_from(n).unwrap_or(i64::MAX))
                    .fetch_all(&inner.pool),
            )
            .await?;
        rows.into_iter()
            .map(|row| {
                Ok(job(
                    topic,
                    column(&row, 0, "peek")?,
                    column(&row, 1, "peek")?,
                    column::<String>(&row, 2, "peek")?.as_str(),
                    column(&row, 3, "peek")?,
                ))
            })
            .collect()
    }
}
