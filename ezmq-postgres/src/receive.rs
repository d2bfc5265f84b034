//! Receiving: fetch the oldest due jobs, or wait for a notification, the
//! next due time or the poll interval, whichever comes first.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ezmq_core::spi::{Delivery, Source};
use ezmq_core::{Headers, Job, JobId, Result, Topic};
use tokio::time::Instant;

use crate::backend::{ms, Inner};
use crate::error::column;
use crate::queue;
use crate::settle::{self, PostgresDelivery};

/// The shortest wait for a job that is due but locked by another
/// transaction (a concurrent fetch or cancel): the next look is that much
/// later, not at once.
const LOCKED_RETRY: Duration = Duration::from_millis(5);

/// [`Backend::receive`](ezmq_core::spi::Backend::receive).
pub(crate) async fn receive(
    inner: &Arc<Inner>,
    source: &Source,
    max: usize,
    wait: Duration,
) -> Result<Vec<Delivery>> {
    let queue = queue::of(source);
    let topic = source.topic();
    let deadline = Instant::now() + wait;
    // Subscribed before the first fetch: a job pushed after the fetch
    // looked wakes this wait.
    let mut woken = inner.wakes.subscribe(&queue);
    loop {
        woken.borrow_and_update();
        let got = fetch(inner, &queue, topic, max).await?;
        if !got.is_empty() {
            return Ok(got);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(got);
        }
        let mut until = deadline.min(now + inner.config.poll_interval);
        if let Some(due) = next_due(inner, &queue).await? {
            until = until.min(now + due.max(LOCKED_RETRY));
        }
        crate::wake::wait(&mut woken, until).await;
    }
}

/// How long until the next job of `queue` is due (zero when one is due
/// now), `None` when the queue is empty.
async fn next_due(inner: &Inner, queue: &str) -> Result<Option<Duration>> {
    let ms: Option<i64> = inner
        .timed(
            "next due",
            sqlx::query_scalar(&inner.sql.next_due)
                .bind(queue)
                .fetch_one(&inner.pool),
        )
        .await?;
    Ok(ms.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
}

/// Takes up to `max` due jobs of `queue`, oldest first; jobs past their
/// ttl are deleted instead of delivered.
async fn fetch(
    inner: &Arc<Inner>,
    queue: &str,
    topic: &Topic,
    max: usize,
) -> Result<Vec<Delivery>> {
    let limit = i64::try_from(max.max(1)).unwrap_or(i64::MAX);
    let rows = inner
        .timed(
            "fetch",
            sqlx::query(&inner.sql.fetch)
                .bind(queue)
                .bind(limit)
                .bind(ms(inner.config.lease))
                .fetch_all(&inner.pool),
        )
        .await?;
    let mut fetched = Vec::with_capacity(rows.len());
    for row in rows {
        let seq: i64 = column(&row, 0, "fetch")?;
        let id: String = column(&row, 1, "fetch")?;
        let body: Vec<u8> = column(&row, 2, "fetch")?;
        let headers: String = column(&row, 3, "fetch")?;
        let attempt: i32 = column(&row, 4, "fetch")?;
        let deliveries: i32 = column(&row, 5, "fetch")?;
        let expired: bool = column(&row, 6, "fetch")?;
        fetched.push((seq, id, body, headers, attempt, deliveries, expired));
    }
    fetched.sort_unstable_by_key(|f| f.0);
    let mut out = Vec::with_capacity(fetched.len());
    let mut dropped = Vec::new();
    for (seq, id, body, headers, attempt, deliveries, expired) in fetched {
        if expired {
            tracing::debug!(topic = %topic, message_id = %id, "job expired before delivery; dropped");
            dropped.push((seq, deliveries));
            continue;
        }
        let job = job(topic, id, body, &headers, attempt);
        let handle = PostgresDelivery::new(Arc::clone(inner), seq, deliveries, job.id().clone());
        out.push(Delivery::new(job, handle));
    }
    if !dropped.is_empty() {
        settle::ack_rows(inner, &dropped).await?;
    }
    Ok(out)
}

/// A job as its row holds it.
pub(crate) fn job(topic: &Topic, id: String, body: Vec<u8>, headers: &str, attempt: i32) -> Job {
    let headers = parse_headers(topic, &id, headers);
    Job::new(JobId::new(id), topic.clone(), Bytes::from(body))
        .with_headers(headers)
        .with_attempt(u32::try_from(attempt.max(1)).unwrap_or(1))
}

/// A row's headers; a foreign row's that are not a map of strings are
/// dropped with a warning (the job itself is delivered).
fn parse_headers(topic: &Topic, id: &str, text: &str) -> Headers {
    match serde_json::from_str(text) {
        Ok(headers) => headers,
        Err(err) => {
            tracing::warn!(topic = %topic, message_id = %id, error = %err,
                "job headers are not a JSON object of strings; delivered without them");
            Headers::new()
        }
    }
}
