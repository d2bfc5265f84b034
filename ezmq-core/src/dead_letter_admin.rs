//! Requeueing and purging dead letters ([`Admin::requeue_dead_letters`],
//! [`Admin::purge`]): what the command line and the dashboard run.
//!
//! Both take the jobs off their topic with the core `receive`, then push
//! each dead letter's job back on its original topic and ack it (requeue)
//! or just ack it (purge). Dead letters not selected are given back at the
//! end. A dead letter is acknowledged only after its job was pushed again
//! and the broker confirmed it, so an interrupted requeue never loses one
//! (a dead letter whose ack was lost can be requeued twice).

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde::Serialize;

use crate::admin::Admin;
use crate::error::Result;
use crate::headers::{Headers, MESSAGE_ID_HEADER, RESERVED_HEADER_PREFIX};
use crate::job::JobId;
use crate::job_meta::JobMeta;
use crate::listener::DeadLetterRecord;
use crate::push_options::PushOptions;
use crate::spi::Delivery;
use crate::topic::Topic;

/// Dead letters taken per receive.
const BATCH: usize = 100;
/// How long a receive waits for the first dead letter: the queue is
/// considered drained when none comes in this time.
const DRAINED_AFTER: Duration = Duration::from_millis(500);
/// Dead letters pushed back at the same time.
const PARALLELISM: usize = 32;

/// Which dead letters to requeue.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadLetterSelection {
    /// Every one.
    All,
    /// Those whose dead-letter id or original job id is listed.
    Ids(HashSet<String>),
}

/// What a requeue or purge did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DrainReport {
    /// `requeue` or `purge`.
    pub action: &'static str,
    /// Dead letters pushed back (requeue) or deleted (purge).
    pub done: u64,
    /// Dead letters left in place (not selected, not a record, or failed
    /// since the requeue started).
    pub left: u64,
    /// Listed ids that were not found.
    pub not_found: Vec<String>,
    /// Errors met (the dead letter stays).
    pub errors: Vec<String>,
}

impl DrainReport {
    /// True when every selected dead letter was found and handled.
    pub fn is_complete(&self) -> bool {
        self.not_found.is_empty() && self.errors.is_empty()
    }
}

impl Admin<'_> {
    /// Pushes the selected dead letters of dead-letter topic `dead` back on
    /// their original topics, with their headers and id, the attempt count
    /// reset; calls `progress` with how many were handled after each
    /// batch. A dead letter that failed again after the requeue started
    /// stops it (a listener that still fails does not make it loop).
    ///
    /// ```no_run
    /// # async fn demo(client: &dyn ezmq_core::MqClient) -> ezmq_core::Result<()> {
    /// use ezmq_core::{DeadLetterSelection, Topic};
    ///
    /// let dead = Topic::new("orders.dead-letter")?;
    /// let report = client
    ///     .admin()
    ///     .requeue_dead_letters(&dead, DeadLetterSelection::All, |_| {})
    ///     .await?;
    /// println!("requeued {}", report.done);
    /// # Ok(()) }
    /// ```
    pub async fn requeue_dead_letters(
        &self,
        dead: &Topic,
        selection: DeadLetterSelection,
        progress: impl Fn(u64),
    ) -> Result<DrainReport> {
        let started_ms = now_ms();
        let mut wanted = match &selection {
            DeadLetterSelection::All => HashSet::new(),
            DeadLetterSelection::Ids(ids) => ids.clone(),
        };
        let mut report = DrainReport {
            action: "requeue",
            ..DrainReport::default()
        };
        let mut held = Vec::new();
        loop {
            let batch = self.take(dead, BATCH, DRAINED_AFTER).await?;
            if batch.is_empty() {
                break;
            }
            let mut chosen = Vec::new();
            let mut newer = false;
            for delivery in batch {
                let record = DeadLetterRecord::from_job(&delivery.job).ok();
                let select = match (&record, &selection) {
                    // Failed again since we started: leave it, and stop.
                    (Some(r), _) if r.failed_at_ms >= started_ms => {
                        newer = true;
                        false
                    }
                    (Some(_), DeadLetterSelection::All) => true,
                    (Some(r), DeadLetterSelection::Ids(_)) => {
                        wanted.remove(delivery.job.id().as_str()) | wanted.remove(&r.job_id)
                    }
                    (None, _) => false,
                };
                match record {
                    Some(record) if select => chosen.push((delivery, record)),
                    _ => held.push(delivery),
                }
            }
            let results: Vec<std::result::Result<(), String>> = futures::stream::iter(chosen)
                .map(|(delivery, record)| self.push_back(delivery, record))
                .buffer_unordered(PARALLELISM)
                .collect()
                .await;
            for result in results {
                match result {
                    Ok(()) => report.done += 1,
                    Err(err) => report.errors.push(err),
                }
            }
            progress(report.done + u64::try_from(report.errors.len()).unwrap_or(0));
            if newer || matches!(&selection, DeadLetterSelection::Ids(_) if wanted.is_empty()) {
                break;
            }
        }
        report.left = give_back(held).await;
        let mut not_found: Vec<String> = wanted.into_iter().collect();
        not_found.sort();
        report.not_found = not_found;
        Ok(report)
    }

    /// Deletes every job waiting in `topic` (a dead-letter topic, say),
    /// calling `progress` with how many were deleted after each batch.
    pub async fn purge(&self, topic: &Topic, progress: impl Fn(u64)) -> Result<DrainReport> {
        let mut report = DrainReport {
            action: "purge",
            ..DrainReport::default()
        };
        loop {
            let batch = self.take(topic, BATCH, DRAINED_AFTER).await?;
            if batch.is_empty() {
                break;
            }
            let handles: Vec<_> = batch.iter().map(|d| d.handle.clone()).collect();
            self.ack_all(&handles).await?;
            report.done += u64::try_from(handles.len()).unwrap_or(0);
            progress(report.done);
        }
        Ok(report)
    }

    /// Pushes the job of `record` back on its topic, then acks the dead
    /// letter; gives the dead letter back when either fails.
    async fn push_back(
        &self,
        delivery: Delivery,
        record: DeadLetterRecord,
    ) -> std::result::Result<(), String> {
        let id = delivery.job.id().to_string();
        let result =
            async {
                let topic = Topic::new(&record.topic)
                    .map_err(|e| format!("{id}: its topic {:?}: {e}", record.topic))?;
                self.runtime()
                    .publish_owned(&topic, record.body(), requeue_options(&record.headers))
                    .await
                    .map_err(|e| format!("{id}: pushing to {:?}: {e}", record.topic))?;
                delivery.handle.ack().await.map_err(|e| {
                    format!("{id}: requeued, but removing the dead letter failed: {e}")
                })
            }
            .await;
        if result.is_err() {
            // Pushed or not, the dead letter goes back: never lost.
            let _ = delivery.handle.release().await;
        }
        result
    }
}

/// What a requeued job keeps: its id (without deduplication, which would
/// take the requeue for a repeat of the first push), its own retry policy
/// and every user header; not ezmq's other headers (`ezmq-attempt` and the
/// like: the attempts start again).
fn requeue_options(headers: &Headers) -> PushOptions {
    let mut options = PushOptions::default();
    if let Some(id) = headers.get(MESSAGE_ID_HEADER) {
        options = options.with_job_id(&JobId::new(id));
    }
    let meta = JobMeta::from_headers(headers);
    if let Some(max) = meta.max_attempts {
        options = options.with_max_attempts(max);
    }
    if let Some(backoff) = meta.backoff {
        options = options.with_backoff(backoff.initial, backoff.max);
    }
    options = options.with_priority(meta.priority);
    for (name, value) in headers.iter() {
        if !name.starts_with(RESERVED_HEADER_PREFIX) {
            options = options.with_header(name, value);
        }
    }
    options
}

/// Gives the deliveries back; returns how many.
async fn give_back(held: Vec<Delivery>) -> u64 {
    futures::future::join_all(held.iter().map(|d| d.handle.release())).await;
    u64::try_from(held.len()).unwrap_or(0)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requeued_jobs_keep_their_headers_not_the_attempt() {
        let mut headers = Headers::new();
        headers.insert("tenant", "acme");
        headers.insert("ezmq-attempt", "5");
        headers.insert(MESSAGE_ID_HEADER, "order-7");
        headers.insert("ezmq-max-attempts", "2");
        let options = requeue_options(&headers);
        assert_eq!(options.headers.get("tenant"), Some("acme"));
        assert_eq!(options.headers.get("ezmq-attempt"), None);
        assert_eq!(options.job_id(), Some("order-7"), "the id is kept");
        assert_eq!(options.message_id, None, "never deduplicated");
        assert_eq!(options.max_attempts, Some(2), "its own policy is kept");
        assert!(options.validate().is_ok());
    }
}
