//! `ezmq listeners`: the listeners and crontabs running now in every
//! process ([`Admin::participants`](ezmq::Admin::participants)).

use chrono::{DateTime, Utc};
use ezmq::presence::Participant;
use ezmq::spi::Capability;
use ezmq::{Client, MqClient};
use serde::Serialize;

use crate::exit::{CliError, CliResult, Context};
use crate::table::{print_json, print_text, Table};

/// One listener or crontab, as printed.
#[derive(Debug, Serialize)]
struct Row {
    /// `host/pid`.
    process: String,
    /// `listener` or what a feature crate registered (`crontab`).
    kind: String,
    /// The topic consumed, or the crontab's name.
    name: String,
    /// The consumer group, for a broadcast group's member.
    group: Option<String>,
    /// Its concurrency limit (listeners).
    concurrency: Option<usize>,
    /// Handlers running at the process's last announcement (listeners).
    in_flight: Option<usize>,
    /// Jobs its handler ran successfully since it started (listeners).
    done: Option<u64>,
    /// Handler runs that failed since it started (listeners).
    failed: Option<u64>,
    /// Paused here or cluster-wide (listeners).
    paused: Option<bool>,
    /// When it started (listeners), RFC 3339.
    started_at: Option<String>,
    /// When its process last announced itself, RFC 3339.
    last_seen: String,
}

fn rfc3339(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(
        || "-".to_owned(),
        |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

fn rows(participants: &[Participant]) -> Vec<Row> {
    let mut rows = Vec::new();
    for p in participants {
        let seen = rfc3339(p.announced_at_ms);
        for l in &p.listeners {
            rows.push(Row {
                process: p.process.clone(),
                kind: "listener".to_owned(),
                name: l.topic.clone(),
                group: l.group.clone(),
                concurrency: Some(l.concurrency),
                in_flight: Some(l.in_flight),
                done: Some(l.succeeded),
                failed: Some(l.failed),
                paused: Some(l.paused),
                started_at: Some(rfc3339(l.started_at_ms)),
                last_seen: seen.clone(),
            });
        }
        for e in &p.entries {
            rows.push(Row {
                process: p.process.clone(),
                kind: e.kind.clone(),
                name: e.name.clone(),
                group: None,
                concurrency: None,
                in_flight: None,
                done: None,
                failed: None,
                paused: None,
                started_at: None,
                last_seen: seen.clone(),
            });
        }
    }
    rows
}

/// Runs `ezmq listeners`.
pub(crate) async fn run(client: &Client, json: bool) -> CliResult<()> {
    if !client.admin().has_presence() {
        return Err(CliError::CapabilityMissing {
            backend: client.backend_name(),
            what: Capability::Peek.to_string(),
            hint: "the broker's own tools list its consumers",
        });
    }
    let participants = client
        .admin()
        .participants()
        .await
        .context(|| "reading the live listeners".to_owned())?;
    let rows = rows(&participants);
    if json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        return print_text("no listener or crontab running\n");
    }
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    let mut table = Table::new([
        "PROCESS",
        "KIND",
        "NAME",
        "GROUP",
        "CONCURRENCY",
        "IN-FLIGHT",
        "DONE",
        "FAILED",
        "PAUSED",
        "STARTED",
        "LAST SEEN",
    ]);
    for r in rows {
        table.row([
            r.process,
            r.kind,
            r.name,
            dash(r.group),
            dash(r.concurrency.map(|n| n.to_string())),
            dash(r.in_flight.map(|n| n.to_string())),
            dash(r.done.map(|n| n.to_string())),
            dash(r.failed.map(|n| n.to_string())),
            dash(r.paused.map(|p| if p { "yes" } else { "no" }.to_owned())),
            dash(r.started_at),
            r.last_seen,
        ]);
    }
    print_text(&table.render())
}
