//! Job control: `ezmq scheduled TOPIC` lists the scheduled and retrying
//! jobs, `ezmq cancel TOPIC ID` removes one that has not started,
//! `ezmq promote TOPIC ID` makes one due now — through the job store
//! (`Capability::JobStore`).

use std::time::UNIX_EPOCH;

use ezmq::spi::{Cancelled, Capability, JobInfo};
use ezmq::{Client, JobId, MqClient};
use serde::Serialize;

use crate::args::{JobArgs, ScheduledArgs};
use crate::exit::{CliError, CliResult, Context};
use crate::table::{clip, headers_cell, print_json, print_text, time_ms, Table};

/// What to do on a broker without a job store.
const HINT: &str = "this backend cannot find jobs by id yet (see its README)";

/// One scheduled or retrying job.
#[derive(Debug, Serialize)]
struct ScheduledJob {
    id: String,
    /// `scheduled` (a delayed push) or `retrying` (waiting for its backoff).
    state: &'static str,
    /// The attempt its next delivery is.
    attempt: u32,
    /// When it becomes ready, Unix milliseconds.
    due_at_ms: Option<u64>,
    headers: ezmq::Headers,
    /// The body's size in bytes.
    body_bytes: usize,
    /// The body, when it is UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<String>,
}

impl From<&JobInfo> for ScheduledJob {
    fn from(info: &JobInfo) -> Self {
        let job = &info.job;
        ScheduledJob {
            id: job.id().to_string(),
            state: info.state.name(),
            attempt: job.attempt(),
            due_at_ms: info.due_at.and_then(|at| {
                at.duration_since(UNIX_EPOCH)
                    .ok()
                    .and_then(|d| u64::try_from(d.as_millis()).ok())
            }),
            headers: job.headers().clone(),
            body_bytes: job.body().len(),
            body: std::str::from_utf8(job.body()).ok().map(str::to_owned),
        }
    }
}

/// Runs `ezmq scheduled`: the topic's scheduled and retrying jobs, the
/// soonest due first.
pub(crate) async fn scheduled(client: &Client, args: ScheduledArgs, json: bool) -> CliResult<()> {
    super::require(client, Capability::JobStore, HINT)?;
    let topic = super::topic(&args.topic)?;
    let found = client
        .admin()
        .scheduled(&topic, args.count)
        .await
        .context(|| format!("listing the scheduled jobs of {topic:?}"))?;
    let jobs: Vec<ScheduledJob> = found.iter().map(ScheduledJob::from).collect();
    if json {
        return print_json(&jobs);
    }
    if jobs.is_empty() {
        return print_text(&format!("no job scheduled in {topic}\n"));
    }
    let mut table = Table::new(["ID", "STATE", "ATTEMPT", "DUE", "HEADERS", "BODY"]);
    for job in &jobs {
        table.row([
            job.id.clone(),
            job.state.to_owned(),
            job.attempt.to_string(),
            job.due_at_ms.map_or_else(|| "-".to_owned(), time_ms),
            headers_cell(&job.headers, 40),
            match &job.body {
                Some(text) => clip(text, 40),
                None => format!("<{} bytes>", job.body_bytes),
            },
        ]);
    }
    print_text(&table.render())
}

/// Runs `ezmq cancel`: removes a job that has not started.
pub(crate) async fn cancel(client: &Client, args: JobArgs, json: bool) -> CliResult<()> {
    super::require(client, Capability::JobStore, HINT)?;
    let topic = super::topic(&args.topic)?;
    let id = JobId::new(args.id.as_str());
    let outcome = client
        .admin()
        .cancel_job(&topic, &id)
        .await
        .context(|| format!("cancelling {id} of {topic:?}"))?;
    let (word, done) = match outcome {
        Cancelled::Removed => ("cancelled", true),
        Cancelled::Running => ("running", false),
        _ => ("not_found", false),
    };
    if json {
        print_json(
            &serde_json::json!({ "topic": topic.as_str(), "id": id.as_str(), "outcome": word }),
        )?;
    } else if done {
        print_text(&format!("cancelled {id}\n"))?;
    }
    match outcome {
        Cancelled::Removed => Ok(()),
        Cancelled::Running => Err(CliError::Incomplete(format!(
            "{id} is running: a handler has it, and it was left to finish"
        ))),
        _ => Err(CliError::Incomplete(format!(
            "no job {id} in {topic} (finished, cancelled, or never pushed)"
        ))),
    }
}

/// Runs `ezmq promote`: makes a scheduled or retrying job due now.
pub(crate) async fn promote(client: &Client, args: JobArgs, json: bool) -> CliResult<()> {
    super::require(client, Capability::JobStore, HINT)?;
    let topic = super::topic(&args.topic)?;
    let id = JobId::new(args.id.as_str());
    let promoted = client
        .admin()
        .promote_job(&topic, &id)
        .await
        .context(|| format!("promoting {id} of {topic:?}"))?;
    if json {
        print_json(
            &serde_json::json!({ "topic": topic.as_str(), "id": id.as_str(), "promoted": promoted }),
        )?;
    } else if promoted {
        print_text(&format!("promoted {id}: due now\n"))?;
    }
    if promoted {
        Ok(())
    } else {
        Err(CliError::Incomplete(format!(
            "{id} is not scheduled or retrying in {topic}"
        )))
    }
}
