//! `ezmq peek TOPIC [-n N]`: waiting jobs, oldest first, not consumed.

use ezmq::spi::Capability;
use ezmq::{Client, Job, MqClient};
use serde::Serialize;

use crate::args::PeekArgs;
use crate::exit::{CliResult, Context};
use crate::table::{clip, headers_cell, print_json, print_text, Table};

/// One peeked job.
#[derive(Debug, Serialize)]
pub(crate) struct PeekedJob {
    /// The job's id.
    pub(crate) id: String,
    /// Its delivery attempt (1 = never delivered before).
    pub(crate) attempt: u32,
    /// Its headers.
    pub(crate) headers: ezmq::Headers,
    /// The body, when it is UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) body: Option<String>,
    /// The body's bytes, when it is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) body_bytes: Option<Vec<u8>>,
}

impl From<&Job> for PeekedJob {
    fn from(job: &Job) -> Self {
        let (body, body_bytes) = match std::str::from_utf8(job.body()) {
            Ok(text) => (Some(text.to_owned()), None),
            Err(_) => (None, Some(job.body().to_vec())),
        };
        PeekedJob {
            id: job.id().to_string(),
            attempt: job.attempt(),
            headers: job.headers().clone(),
            body,
            body_bytes,
        }
    }
}

/// Runs `ezmq peek`.
pub(crate) async fn run(client: &Client, args: PeekArgs, json: bool) -> CliResult<()> {
    const HINT: &str = "this broker cannot read a queue without consuming it";
    super::require(client, Capability::Peek, HINT)?;
    let topic = super::topic(&args.topic)?;
    let jobs = client
        .admin()
        .peek(&topic, args.count)
        .await
        .context(|| format!("peeking at {topic:?}"))?;
    let jobs: Vec<PeekedJob> = jobs.iter().map(PeekedJob::from).collect();
    if json {
        return print_json(&jobs);
    }
    let mut table = Table::new(["ID", "ATTEMPT", "HEADERS", "BODY"]);
    for job in &jobs {
        let body = match (&job.body, &job.body_bytes) {
            (Some(text), _) => clip(text, 60),
            (None, Some(bytes)) => format!("<{} bytes>", bytes.len()),
            (None, None) => String::new(),
        };
        table.row([
            job.id.clone(),
            job.attempt.to_string(),
            headers_cell(&job.headers, 40),
            body,
        ]);
    }
    if table.is_empty() {
        return print_text(&format!("no job waiting in {topic}\n"));
    }
    print_text(&table.render())
}
