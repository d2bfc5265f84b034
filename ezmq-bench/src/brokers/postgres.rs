//! PostgreSQL: raw `sqlx` loops running the statements `ezmq-postgres`
//! runs (its push `INSERT` with its `NOTIFY`, its `SKIP LOCKED` fetch and
//! its batched `DELETE`) against `ezmq-postgres`, on the default schema
//! `ezmq`.

mod batch;
pub(crate) mod deep_fetch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ezmq_core::{Client, MqClient};
use sqlx::postgres::{PgListener, PgPoolOptions};
use sqlx::{PgPool, Row};
use tokio::task::{JoinHandle, JoinSet};

use crate::brokers::{RawBroker, RawNotes, Sender};
use crate::scenario::latency::Recorder;
use crate::BoxResult;

/// The default URL (`EZMQ_TEST_POSTGRES_URL` overrides it).
pub(crate) const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// The raw side's pool (ezmq's default `max_connections`).
const POOL: u32 = 10;
/// The longest the raw receiver waits for a notification before it looks
/// again (ezmq's default `poll_interval` is 1 s; a notification ends it).
const LISTEN_WAIT: Duration = Duration::from_millis(100);
/// The lease the raw fetch sets (ezmq's default).
const LEASE_MS: i64 = 30_000;

/// ezmq's push of one job: the row and the notification.
const PUSH: &str =
    "WITH ins AS (INSERT INTO ezmq.jobs (queue, id, body, headers, attempt, visible_at) \
                    VALUES ($1, $2, $3, '{}'::jsonb, 1, now()) RETURNING queue) \
                    SELECT pg_notify('ezmq_ezmq', queue) FROM ins";
/// ezmq's fetch.
const FETCH: &str = "WITH picked AS (SELECT seq FROM ezmq.jobs WHERE queue = $1 AND visible_at <= now() \
                     ORDER BY visible_at, seq LIMIT $2 FOR UPDATE SKIP LOCKED) \
                     UPDATE ezmq.jobs j SET visible_at = now() + $3::bigint * interval '1 millisecond', \
                     leased = true, deliveries = j.deliveries + 1 FROM picked WHERE j.seq = picked.seq \
                     RETURNING j.seq, j.deliveries, j.body";
/// ezmq's acknowledgement of a batch.
const ACK: &str =
    "DELETE FROM ezmq.jobs j USING unnest($1::bigint[], $2::int[]) AS t(seq, deliveries) \
                   WHERE j.seq = t.seq AND j.deliveries = t.deliveries AND j.leased";

/// A PostgreSQL server and the raw pool on it.
pub(crate) struct PostgresBench {
    url: String,
    pool: PgPool,
}

impl PostgresBench {
    /// The deep-fetch rows ([`deep_fetch`]).
    pub(crate) async fn deep_fetch(
        &self,
        s: &crate::scenario::Settings,
        goals: &mut crate::table::Table,
    ) -> BoxResult<()> {
        deep_fetch::run(&self.url, &self.pool, s, goals).await
    }
}

impl PostgresBench {
    /// Connects to `url` and makes sure ezmq's schema is there (an ezmq
    /// client creates it).
    pub(crate) async fn connect(url: &str) -> BoxResult<Self> {
        let pool = tokio::time::timeout(
            Duration::from_secs(2),
            PgPoolOptions::new().max_connections(POOL).connect(url),
        )
        .await
        .map_err(|_| format!("no answer from {url}"))??;
        let schema = ezmq_postgres::connect_url(url).await?;
        schema.shutdown(Duration::from_secs(1)).await?;
        Ok(PostgresBench {
            url: url.to_owned(),
            pool,
        })
    }
}

/// A fresh job id, as ezmq's are (UUIDv7).
fn job_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// One raw fetch of up to `k` jobs of `queue`: `(seq, deliveries, body)`.
async fn fetch(pool: &PgPool, queue: &str, k: usize) -> BoxResult<Vec<(i64, i32, Vec<u8>)>> {
    let rows = sqlx::query(FETCH)
        .bind(queue)
        .bind(i64::try_from(k).unwrap_or(i64::MAX))
        .bind(LEASE_MS)
        .fetch_all(pool)
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        out.push((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?));
    }
    Ok(out)
}

/// Deletes the fetched rows `jobs`, in one statement.
async fn ack(pool: &PgPool, seqs: Vec<i64>, deliveries: Vec<i32>) -> BoxResult<()> {
    sqlx::query(ACK)
        .bind(&seqs)
        .bind(&deliveries)
        .execute(pool)
        .await?;
    Ok(())
}

impl RawBroker for PostgresBench {
    fn name(&self) -> &'static str {
        "PostgreSQL"
    }

    fn goal_ratio(&self) -> f64 {
        0.85
    }

    fn p99_goal(&self) -> Duration {
        Duration::from_millis(10)
    }

    fn latency_goal_rate(&self) -> u64 {
        500
    }

    /// 500 and 1k msg/s: one-row pushes top out at about 4,500/s here, so
    /// 10k/s would only measure a queue of pushes waiting for the pool.
    fn latency_rates(&self, _: &crate::scenario::Settings) -> Vec<u64> {
        vec![500, 1_000]
    }

    fn raw_notes(&self) -> RawNotes {
        RawNotes {
            push_col: "raw INSERT+NOTIFY",
            consume_col: "raw SKIP LOCKED fetch+DELETE loop",
            push: "one `sqlx` pool of 10 connections shared by the tasks, ezmq's push \
                   statement word for word (`INSERT INTO ezmq.jobs … RETURNING queue` with \
                   `pg_notify` in one statement) with a fresh UUIDv7 id and `{}` headers.",
            consume: "one loop: ezmq's fetch statement (`UPDATE … FROM (SELECT … ORDER BY \
                      visible_at, seq LIMIT 64 FOR UPDATE SKIP LOCKED) RETURNING …`), then ezmq's \
                      batched `DELETE … USING unnest(…)` of the rows, awaited, then the next \
                      fetch; timed until the last delete.",
            latency: "one fetch loop (`LIMIT 64`) woken by `LISTEN ezmq_ezmq` (or after 100 ms), \
                      latency taken when the fetch returns, the `DELETE` in the background.",
        }
    }

    async fn ezmq(&self) -> BoxResult<Client> {
        Ok(ezmq_postgres::connect_url(&self.url).await?)
    }

    async fn raw_sender(&self, queue: &str) -> BoxResult<Sender> {
        let (pool, queue) = (self.pool.clone(), queue.to_owned());
        Ok(Arc::new(move |body| {
            let (pool, queue) = (pool.clone(), queue.clone());
            Box::pin(async move {
                sqlx::query(PUSH)
                    .bind(&queue)
                    .bind(job_id())
                    .bind(body.as_ref())
                    .bind("{}")
                    .bind(1_i32)
                    .bind(0_i64)
                    .bind(0_i64)
                    .execute(&pool)
                    .await?;
                Ok(())
            })
        }))
    }

    async fn raw_consume(&self, queue: &str, n: u64, k: usize) -> BoxResult<Duration> {
        let start = Instant::now();
        let mut got = 0u64;
        while got < n {
            if start.elapsed() > super::DRAIN_LIMIT {
                return Err(
                    format!("raw consume: only {got} of {n} in {:?}", super::DRAIN_LIMIT).into(),
                );
            }
            let jobs = fetch(&self.pool, queue, k).await?;
            if jobs.is_empty() {
                continue;
            }
            got += jobs.len() as u64;
            let (seqs, deliveries) = jobs.into_iter().map(|(s, d, _)| (s, d)).unzip();
            ack(&self.pool, seqs, deliveries).await?;
        }
        Ok(start.elapsed())
    }

    async fn raw_receiver(
        &self,
        queue: &str,
        k: usize,
        rec: Arc<Recorder>,
        stop: Arc<AtomicBool>,
    ) -> BoxResult<JoinHandle<BoxResult<()>>> {
        let mut listener = PgListener::connect(&self.url).await?;
        listener.listen("ezmq_ezmq").await?;
        let (pool, queue) = (self.pool.clone(), queue.to_owned());
        Ok(tokio::spawn(async move {
            let mut acks: JoinSet<BoxResult<()>> = JoinSet::new();
            while !stop.load(Ordering::Relaxed) {
                let jobs = fetch(&pool, &queue, k).await?;
                if jobs.is_empty() {
                    // A notification that came during the fetch is
                    // buffered: this returns at once for it.
                    let _ = tokio::time::timeout(LISTEN_WAIT, listener.recv()).await;
                    continue;
                }
                let mut seqs = Vec::with_capacity(jobs.len());
                let mut deliveries = Vec::with_capacity(jobs.len());
                for (seq, delivery, body) in jobs {
                    rec.record(&body);
                    seqs.push(seq);
                    deliveries.push(delivery);
                }
                let pool = pool.clone();
                acks.spawn(async move { ack(&pool, seqs, deliveries).await });
                while let Some(done) = acks.try_join_next() {
                    done??;
                }
            }
            while let Some(done) = acks.join_next().await {
                done??;
            }
            Ok(())
        }))
    }

    async fn cleanup(&self, queue: &str) -> BoxResult<()> {
        sqlx::query("DELETE FROM ezmq.jobs WHERE queue = $1 OR queue LIKE '__ezmq|lane|%|' || $1")
            .bind(queue)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
