//! `ezmq dead-letters TOPIC [--requeue [ID...|--all] | --purge [--yes]]`.
//!
//! Listing reads the dead-letter topic with [`Peek`](ezmq::spi::Peek), so
//! nothing moves; on a backend without it (RabbitMQ) listing fails with
//! exit code 4. Requeue and purge need only the core calls (receive, then
//! ack or give back), so they work on every backend.

mod drain;

use std::io::IsTerminal;

use ezmq::spi::Capability;
use ezmq::{Client, DeadLetterRecord, DeadLetterSelection, Job, MqClient, Topic};
use serde::Serialize;

use crate::args::DeadLettersArgs;
use crate::exit::{CliError, CliResult, Context};
use crate::table::{clip, print_json, print_text, time_ms, Table};

/// One listed dead letter: its id on the dead-letter topic and its record.
#[derive(Debug, Serialize)]
struct Listed {
    /// The dead letter's own id (what `--requeue ID` takes; the original
    /// job id, `job_id`, works too).
    id: String,
    #[serde(flatten)]
    record: Option<DeadLetterRecord>,
    /// Why the body is not a dead-letter record, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    invalid: Option<String>,
}

/// Runs `ezmq dead-letters`.
pub(crate) async fn run(client: &Client, args: DeadLettersArgs, json: bool) -> CliResult<()> {
    let name = args
        .dead_letter_topic
        .clone()
        .unwrap_or_else(|| format!("{}.dead-letter", args.topic));
    let dead = super::topic(&name)?;
    if args.purge {
        confirm_purge(client, &dead, args.yes).await?;
        let report = drain::purge(client, &dead).await?;
        return drain::print(&report, json, &dead);
    }
    match args.requeue {
        Some(ids) if args.all || !ids.is_empty() => {
            let selection = if args.all {
                DeadLetterSelection::All
            } else {
                DeadLetterSelection::Ids(ids.into_iter().collect())
            };
            let report = drain::requeue(client, &dead, selection).await?;
            drain::print(&report, json, &dead)?;
            drain::check(&report)
        }
        Some(_) => Err(CliError::Usage(
            "--requeue needs dead-letter ids or --all".to_owned(),
        )),
        None => list(client, &dead, args.count, json).await,
    }
}

/// Lists up to `count` dead letters of `dead` without consuming them.
async fn list(client: &Client, dead: &Topic, count: usize, json: bool) -> CliResult<()> {
    const HINT: &str = "listing needs peek; --requeue --all and --purge work without it";
    super::require(client, Capability::Peek, HINT)?;
    let jobs = client
        .peek(dead.as_str(), count)
        .await
        .context(|| format!("reading the dead letters in {dead:?}"))?;
    let listed: Vec<Listed> = jobs.iter().map(listed).collect();
    if json {
        return print_json(&listed);
    }
    if listed.is_empty() {
        return print_text(&format!("no dead letter in {dead}\n"));
    }
    let mut table = Table::new([
        "ID",
        "JOB",
        "ATTEMPTS",
        "FIRST FAILURE",
        "LAST FAILURE",
        "ERROR",
    ]);
    for item in &listed {
        match (&item.record, &item.invalid) {
            (Some(r), _) => table.row([
                item.id.clone(),
                r.job_id.clone(),
                r.attempts.to_string(),
                r.first_failed_at_ms.map_or_else(|| "-".to_owned(), time_ms),
                time_ms(r.failed_at_ms),
                clip(&r.error, 60),
            ]),
            (None, reason) => table.row([
                item.id.clone(),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                format!(
                    "not a dead-letter record: {}",
                    reason.as_deref().unwrap_or("")
                ),
            ]),
        }
    }
    print_text(&table.render())
}

fn listed(job: &Job) -> Listed {
    match DeadLetterRecord::from_job(job) {
        Ok(record) => Listed {
            id: job.id().to_string(),
            record: Some(record),
            invalid: None,
        },
        Err(err) => Listed {
            id: job.id().to_string(),
            record: None,
            invalid: Some(err.to_string()),
        },
    }
}

/// Asks on the terminal unless `yes`; without a terminal, `--yes` is
/// required.
async fn confirm_purge(client: &Client, dead: &Topic, yes: bool) -> CliResult<()> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::NotConfirmed(
            "refusing to purge without --yes: stdin is not a terminal",
        ));
    }
    let count = match client.queue_len(dead.as_str()).await {
        Ok(n) => format!("{n} dead letters"),
        Err(_) => "every dead letter".to_owned(),
    };
    eprint!("Delete {count} in {dead}? This cannot be undone. [y/N] ");
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|e| CliError::Output(std::io::Error::other(e)))??;
    if matches!(answer.trim(), "y" | "Y" | "yes" | "YES") {
        Ok(())
    } else {
        Err(CliError::NotConfirmed("purge not confirmed"))
    }
}
