//! Each crontab's recent runs: after a run, the participant that ran it
//! pushes a [`CronRun`] to the internal topic `__ezmq|cron-history|<name>`
//! (nobody consumes it) and takes the oldest records off when there are
//! more than [`CrontabOptions::history`](crate::CrontabOptions::history).
//! [`cron_history`] reads them with [`Peek`](ezmq_core::spi::Peek), so it
//! works on backends that can peek (Disque, Redis); on the others runs are
//! not recorded (RabbitMQ cannot read a queue without consuming it).
//!
//! Records live at most [`RECORD_TTL`]; two participants trimming at once
//! may take one record too many.

use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use ezmq_core::spi::{Backend, Capability, Source};
use ezmq_core::{JobMeta, MqClient, PushOptions, Result, Topic};
use serde::{Deserialize, Serialize};
use tracing::debug;

/// The `kind` of the history topics.
const KIND: &str = "cron-history";

/// How long a run's record is kept at most (7 days).
pub const RECORD_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The longest error text a record keeps, in bytes.
const MAX_ERROR_LEN: usize = 500;

/// The longest a history write may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunOutcome {
    /// The handler returned `Ok`.
    Succeeded,
    /// The handler returned an error.
    Failed,
    /// The handler panicked.
    Panicked,
}

impl RunOutcome {
    /// `succeeded`, `failed` or `panicked`.
    pub fn name(self) -> &'static str {
        match self {
            RunOutcome::Succeeded => "succeeded",
            RunOutcome::Failed => "failed",
            RunOutcome::Panicked => "panicked",
        }
    }
}

/// One run of a crontab, as its history keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CronRun {
    /// The tick it ran for.
    pub tick: DateTime<Utc>,
    /// Who ran it: `host/pid`.
    pub participant: String,
    /// When the handler started.
    pub started_at: DateTime<Utc>,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The error or panic message (at most 500 bytes), when it did not
    /// succeed.
    pub error: Option<String>,
}

impl CronRun {
    /// A record of a run of `tick` by `participant` that started at
    /// `started_at` and ended now.
    pub(crate) fn ended(
        tick: DateTime<Utc>,
        participant: &str,
        started_at: SystemTime,
        outcome: RunOutcome,
        error: Option<String>,
    ) -> Self {
        let duration = started_at.elapsed().unwrap_or_default();
        CronRun {
            tick,
            participant: participant.to_owned(),
            started_at: started_at.into(),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            outcome,
            error: error.map(|e| clip(e, MAX_ERROR_LEN)),
        }
    }
}

/// The history topic of crontab `name`.
fn topic(name: &str) -> Result<Topic> {
    Topic::internal(KIND, &[name])
}

/// Records `run` of crontab `name`, keeping the newest `keep` records.
/// Never fails: problems are logged at debug (a history is best-effort).
pub(crate) async fn record(backend: &dyn Backend, name: &str, run: &CronRun, keep: usize) {
    if keep == 0 || !backend.capabilities().has(Capability::Peek) {
        return;
    }
    match tokio::time::timeout(CALL_TIMEOUT, write(backend, name, run, keep)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => debug!(cron = %name, cause = %e, "could not record the run"),
        Err(_) => debug!(cron = %name, "recording the run timed out"),
    }
}

async fn write(backend: &dyn Backend, name: &str, run: &CronRun, keep: usize) -> Result<()> {
    let topic = topic(name)?;
    let body = serde_json::to_vec(run)?;
    // Trimmed before the write, so a reader never sees more than `keep`.
    trim(backend, &topic, keep - 1).await?;
    let mut options = PushOptions::new().with_ttl(RECORD_TTL);
    JobMeta::stamp(&mut options);
    backend.publish(&topic, body.into(), &options).await?;
    Ok(())
}

/// Drops the oldest records of `topic` until at most `keep` are left.
async fn trim(backend: &dyn Backend, topic: &Topic, keep: usize) -> Result<()> {
    let Some(stats) = backend.queue_stats() else {
        return Ok(());
    };
    let stored = usize::try_from(stats.queue_len(topic).await?).unwrap_or(usize::MAX);
    if stored <= keep {
        return Ok(());
    }
    // The oldest records: what a receive takes first.
    let source = Source::Topic(topic.clone());
    let oldest = backend
        .receive(&source, stored - keep, Duration::ZERO)
        .await?;
    let handles: Vec<_> = oldest.into_iter().map(|d| d.handle).collect();
    backend.ack_batch(&handles).await
}

/// The newest `n` runs of crontab `name`, newest first, as its history
/// keeps them (see [`CrontabOptions::history`](crate::CrontabOptions::history)).
///
/// Fails with [`Error::Unsupported`](ezmq_core::Error::Unsupported) on a
/// backend without [`Capability::Peek`] (RabbitMQ).
///
/// ```no_run
/// # async fn demo(client: &ezmq_core::Client) -> ezmq_core::Result<()> {
/// for run in ezmq_crontab::cron_history(client, "nightly-report", 10).await? {
///     println!("{} by {}: {} in {} ms", run.tick, run.participant, run.outcome.name(), run.duration_ms);
/// }
/// # Ok(()) }
/// ```
pub async fn cron_history<C: MqClient + ?Sized>(
    client: &C,
    name: &str,
    n: usize,
) -> Result<Vec<CronRun>> {
    let runtime = client.runtime();
    runtime.ensure_open()?;
    let peek = runtime
        .backend()
        .peek()
        .ok_or_else(|| runtime.unsupported(Capability::Peek))?;
    let jobs = peek.peek(&topic(name)?, MAX_READ).await?;
    let mut runs: Vec<CronRun> = jobs.iter().filter_map(|job| job.json().ok()).collect();
    runs.sort_by_key(|run| std::cmp::Reverse(run.tick));
    runs.truncate(n);
    Ok(runs)
}

/// The most records read: a history is trimmed to its `history` setting,
/// so this only bounds a read of one written with a larger one.
const MAX_READ: usize = 1000;

fn clip(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_errors_are_clipped() {
        let tick: DateTime<Utc> = "2026-12-02T10:00:00Z".parse().unwrap();
        let run = CronRun::ended(
            tick,
            "host/1",
            SystemTime::now(),
            RunOutcome::Failed,
            Some("é".repeat(400)),
        );
        assert!(run.error.as_ref().unwrap().len() <= MAX_ERROR_LEN);
        let json = serde_json::to_value(&run).unwrap();
        assert_eq!(json["outcome"], "failed");
        let back: CronRun = serde_json::from_value(json).unwrap();
        assert_eq!(back, run);
    }
}
