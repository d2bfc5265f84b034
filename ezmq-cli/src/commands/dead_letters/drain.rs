//! Requeue and purge: take the dead letters off their topic with the core
//! `receive`, then push each back on its original topic and ack it
//! (requeue) or just ack it (purge). Dead letters not selected are given
//! back at the end.
//!
//! A dead letter is acknowledged only after its job was pushed again and
//! the broker confirmed it, so an interrupted requeue never loses one (a
//! dead letter whose ack was lost can be requeued twice).

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ezmq::spi::Delivery;
use ezmq::{
    Client, DeadLetterRecord, Headers, JobId, JobMeta, MqClient, PushOptions, Topic,
    MESSAGE_ID_HEADER, RESERVED_HEADER_PREFIX,
};
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::exit::{CliError, CliResult, Context};
use crate::table::{print_json, print_text};

/// Dead letters taken per receive.
const BATCH: usize = 100;
/// How long a receive waits for the first dead letter: the queue is
/// considered drained when none comes in this time.
const DRAINED_AFTER: Duration = Duration::from_millis(500);
/// Dead letters pushed back at the same time.
const PARALLELISM: usize = 32;

/// Which dead letters to requeue.
#[derive(Debug)]
pub(crate) enum Selection {
    /// Every one.
    All,
    /// Those whose dead-letter id or original job id is listed.
    Ids(HashSet<String>),
}

/// What a requeue or purge did.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Report {
    /// `requeue` or `purge`.
    action: &'static str,
    /// Dead letters pushed back (requeue) or deleted (purge).
    done: u64,
    /// Dead letters left in place (not selected, not a record, or failed
    /// since the command started).
    left: u64,
    /// Listed ids that were not found.
    not_found: Vec<String>,
    /// Errors met (the dead letter stays).
    errors: Vec<String>,
}

impl Report {
    /// Prints the report.
    pub(crate) fn print(&self, json: bool, dead: &Topic) -> CliResult<()> {
        if json {
            return print_json(self);
        }
        let verb = if self.action == "purge" {
            "deleted"
        } else {
            "requeued"
        };
        let mut text = format!("{verb} {} dead letters of {dead}", self.done);
        if self.left > 0 {
            text.push_str(&format!(", {} left in place", self.left));
        }
        text.push('\n');
        for id in &self.not_found {
            text.push_str(&format!("not found: {id}\n"));
        }
        for err in &self.errors {
            text.push_str(&format!("error: {err}\n"));
        }
        print_text(&text)
    }

    /// Fails (exit code 1) when something was not done.
    pub(crate) fn check(&self) -> CliResult<()> {
        if self.not_found.is_empty() && self.errors.is_empty() {
            Ok(())
        } else {
            Err(CliError::Incomplete(format!(
                "{} ids not found, {} errors",
                self.not_found.len(),
                self.errors.len()
            )))
        }
    }
}

/// Pushes the selected dead letters of `dead` back on their topics.
pub(crate) async fn requeue(
    client: &Client,
    dead: &Topic,
    selection: Selection,
) -> CliResult<Report> {
    let started_ms = now_ms();
    let mut wanted = match &selection {
        Selection::All => HashSet::new(),
        Selection::Ids(ids) => ids.clone(),
    };
    let progress = progress(client, dead, "requeueing").await;
    let mut report = Report {
        action: "requeue",
        ..Report::default()
    };
    let mut held = Vec::new();
    loop {
        let batch = receive(client, dead).await?;
        if batch.is_empty() {
            break;
        }
        let mut chosen = Vec::new();
        let mut newer = false;
        for delivery in batch {
            let record = DeadLetterRecord::from_job(&delivery.job).ok();
            let select = match (&record, &selection) {
                // Failed again since we started (a listener still
                // failing): leave it, and stop.
                (Some(r), _) if r.failed_at_ms >= started_ms => {
                    newer = true;
                    false
                }
                (Some(_), Selection::All) => true,
                (Some(r), Selection::Ids(_)) => {
                    wanted.remove(delivery.job.id().as_str()) | wanted.remove(&r.job_id)
                }
                (None, _) => false,
            };
            match record {
                Some(record) if select => chosen.push((delivery, record)),
                _ => held.push(delivery),
            }
        }
        let results: Vec<Result<(), String>> = futures::stream::iter(chosen)
            .map(|(delivery, record)| push_back(client, delivery, record))
            .buffer_unordered(PARALLELISM)
            .collect()
            .await;
        for result in results {
            match result {
                Ok(()) => report.done += 1,
                Err(err) => report.errors.push(err),
            }
            progress.inc(1);
        }
        if newer || matches!(&selection, Selection::Ids(_) if wanted.is_empty()) {
            break;
        }
    }
    report.left = give_back(held).await;
    progress.finish_and_clear();
    let mut not_found: Vec<String> = wanted.into_iter().collect();
    not_found.sort();
    report.not_found = not_found;
    Ok(report)
}

/// Deletes every dead letter of `dead`.
pub(crate) async fn purge(client: &Client, dead: &Topic) -> CliResult<Report> {
    let progress = progress(client, dead, "purging").await;
    let mut report = Report {
        action: "purge",
        ..Report::default()
    };
    loop {
        let batch = receive(client, dead).await?;
        if batch.is_empty() {
            break;
        }
        let handles: Vec<_> = batch.iter().map(|d| d.handle.clone()).collect();
        let n = handles.len() as u64;
        client
            .admin()
            .ack_all(&handles)
            .await
            .context(|| format!("deleting dead letters of {dead:?}"))?;
        report.done += n;
        progress.inc(n);
    }
    progress.finish_and_clear();
    Ok(report)
}

/// Up to [`BATCH`] dead letters; none once the topic is drained.
async fn receive(client: &Client, dead: &Topic) -> CliResult<Vec<Delivery>> {
    client
        .admin()
        .take(dead, BATCH, DRAINED_AFTER)
        .await
        .context(|| format!("reading the dead letters in {dead:?}"))
}

/// Pushes the job of `record` back on its topic (its headers kept, the
/// attempt count reset), then acks the dead letter.
async fn push_back(
    client: &Client,
    delivery: Delivery,
    record: DeadLetterRecord,
) -> Result<(), String> {
    let id = delivery.job.id().to_string();
    let result = async {
        let options = push_options(&record.headers);
        client
            .push_with(&record.topic, record.body(), options)
            .await
            .map_err(|e| format!("{id}: pushing to {:?}: {e}", record.topic))?;
        delivery
            .handle
            .ack()
            .await
            .map_err(|e| format!("{id}: requeued, but removing the dead letter failed: {e}"))
    }
    .await;
    if result.is_err() {
        // Pushed or not, the dead letter goes back: never lost.
        let _ = delivery.handle.release().await;
    }
    result
}

/// What a requeued job keeps: its id (without deduplication, which would
/// take the requeue for a repeat of the first push), its own retry policy
/// and every user header; not ezmq's other headers (`ezmq-attempt` and the
/// like: the attempts start again).
fn push_options(headers: &Headers) -> PushOptions {
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
    let n = held.len() as u64;
    futures::future::join_all(held.iter().map(|d| d.handle.release())).await;
    n
}

/// A progress bar on stderr when it is a terminal (its length the
/// topic's length when the backend can tell), hidden otherwise.
async fn progress(client: &Client, dead: &Topic, what: &'static str) -> ProgressBar {
    if !crate::term::stderr_is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match client.queue_len(dead.as_str()).await {
        Ok(len) => ProgressBar::new(len).with_style(
            ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} (eta {eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        ),
        Err(_) => ProgressBar::new_spinner(),
    };
    bar.set_message(what);
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
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
        let options = push_options(&headers);
        assert_eq!(options.headers.get("tenant"), Some("acme"));
        assert_eq!(options.headers.get("ezmq-attempt"), None);
        assert_eq!(options.job_id(), Some("order-7"), "the id is kept");
        assert_eq!(options.message_id, None, "never deduplicated");
        assert_eq!(options.max_attempts, Some(2), "its own policy is kept");
        assert!(options.validate().is_ok());
    }
}
