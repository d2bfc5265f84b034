//! Pushes: one `INSERT` (with its `NOTIFY`) per job, one per batch.

use bytes::Bytes;
use ezmq_core::{JobId, PushOptions, Result, Topic};

use crate::backend::{ms, Inner};

/// What a job's row is made of, from its stamped options.
pub(crate) struct Row {
    pub(crate) id: JobId,
    pub(crate) headers: String,
    pub(crate) attempt: i32,
    pub(crate) delay_ms: i64,
    pub(crate) ttl_ms: i64,
}

impl Row {
    pub(crate) fn of(options: &PushOptions) -> Result<Row> {
        Ok(Row {
            id: options.stamped_id().unwrap_or_else(JobId::generate),
            headers: serde_json::to_string(&options.headers)?,
            attempt: i32::try_from(options.headers.attempt().unwrap_or(1).max(1))
                .unwrap_or(i32::MAX),
            delay_ms: options.delay.map_or(0, ms),
            ttl_ms: options.ttl.map_or(0, ms),
        })
    }
}

impl Inner {
    /// Stores one job; with a producer-chosen message id, only when no
    /// push of that id is remembered (the id's window).
    pub(crate) async fn publish(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<JobId> {
        let row = Row::of(options)?;
        let done = self
            .timed_push(
                topic,
                self.insert(topic, &body, options, &row).execute(&self.pool),
            )
            .await?;
        if done.rows_affected() == 0 {
            tracing::debug!(topic = %topic, message_id = %row.id, "duplicate push stored nothing");
        }
        Ok(row.id)
    }

    /// The `INSERT` (and `NOTIFY`) of one job as `row`, bound: run on the
    /// pool, or on the caller's connection inside its transaction (the
    /// notification then goes out at the commit).
    pub(crate) fn insert<'q>(
        &'q self,
        topic: &'q Topic,
        body: &'q [u8],
        options: &'q PushOptions,
        row: &'q Row,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        let statement = match options.message_id {
            Some(_) => &self.sql.push_deduplicated,
            None => &self.sql.push,
        };
        let query = sqlx::query(statement)
            .bind(topic.as_str())
            .bind(row.id.as_str())
            .bind(body)
            .bind(&row.headers)
            .bind(row.attempt)
            .bind(row.delay_ms)
            .bind(row.ttl_ms);
        match &options.message_id {
            Some(message_id) => query
                .bind(message_id.as_str())
                .bind(ms(self.config.message_id_window)),
            None => query,
        }
    }

    /// Stores a batch: the jobs without a message id in one statement,
    /// the others one by one, concurrently.
    pub(crate) async fn publish_batch(
        &self,
        topic: &Topic,
        jobs: &[(Bytes, PushOptions)],
    ) -> Vec<Result<JobId>> {
        let mut results: Vec<Option<Result<JobId>>> = (0..jobs.len()).map(|_| None).collect();
        let mut ids = Vec::with_capacity(jobs.len());
        let mut bodies: Vec<&[u8]> = Vec::with_capacity(jobs.len());
        let mut headers = Vec::with_capacity(jobs.len());
        let mut attempts = Vec::with_capacity(jobs.len());
        let mut delays = Vec::with_capacity(jobs.len());
        let mut ttls = Vec::with_capacity(jobs.len());
        let mut plain = Vec::with_capacity(jobs.len());
        let mut singles = Vec::new();
        for (index, (body, options)) in jobs.iter().enumerate() {
            if options.message_id.is_some() {
                singles.push(index);
                continue;
            }
            match Row::of(options) {
                Ok(row) => {
                    ids.push(row.id.as_str().to_owned());
                    bodies.push(&body[..]);
                    headers.push(row.headers);
                    attempts.push(row.attempt);
                    delays.push(row.delay_ms);
                    ttls.push(row.ttl_ms);
                    plain.push((index, row.id));
                }
                Err(err) => results[index] = Some(Err(err)),
            }
        }
        let batch = async {
            if plain.is_empty() {
                return Ok(());
            }
            let query = sqlx::query(&self.sql.push_batch)
                .bind(topic.as_str())
                .bind(&ids)
                .bind(&bodies)
                .bind(&headers)
                .bind(&attempts)
                .bind(&delays)
                .bind(&ttls);
            self.timed_push(topic, query.execute(&self.pool))
                .await
                .map(drop)
        };
        let one_by_one = futures::future::join_all(
            singles
                .iter()
                .map(|&index| self.publish(topic, jobs[index].0.clone(), &jobs[index].1)),
        );
        let (batch, singles_done) = futures::future::join(batch, one_by_one).await;
        for (index, id) in plain {
            results[index] = Some(match &batch {
                Ok(()) => Ok(id),
                Err(err) => Err(crate::error::batch_copy(err, topic)),
            });
        }
        for (index, result) in singles.into_iter().zip(singles_done) {
            results[index] = Some(result);
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(ezmq_core::Error::Shutdown)))
            .collect()
    }
}
