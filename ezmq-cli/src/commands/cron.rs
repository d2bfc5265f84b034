//! `ezmq cron list`: the crontabs announced by running schedulers
//! ([`ezmq::crontab::announced_crontabs`]), with their last tick run and
//! their next tick; `ezmq cron history NAME`: a crontab's recent runs
//! ([`ezmq::crontab::cron_history`]).

use ezmq::crontab::{announced_crontabs, CrontabStatus};
use ezmq::spi::Capability;
use ezmq::{Client, MqClient};
use serde::Serialize;

use crate::args::CronHistoryArgs;
use crate::exit::{CliError, CliResult, Context};
use crate::table::{print_json, print_text, Table};

/// One crontab, as printed.
#[derive(Debug, Serialize)]
struct Crontab {
    name: String,
    spec: String,
    timezone: String,
    /// RFC 3339, `null` when no participant announced a run yet.
    last_tick: Option<String>,
    last_tick_by: Option<String>,
    /// RFC 3339, `null` when the schedule has no more ticks.
    next_tick: Option<String>,
    participants: Vec<String>,
}

impl From<CrontabStatus> for Crontab {
    fn from(s: CrontabStatus) -> Self {
        Crontab {
            name: s.name,
            spec: s.spec,
            timezone: s.timezone,
            last_tick: s.last_tick.map(|t| t.to_rfc3339()),
            last_tick_by: s.last_tick_by,
            next_tick: s.next_tick.map(|t| t.to_rfc3339()),
            participants: s.participants,
        }
    }
}

/// Runs `ezmq cron list`.
pub(crate) async fn list(client: &Client, json: bool) -> CliResult<()> {
    if !client.admin().has_presence() {
        return Err(CliError::CapabilityMissing {
            backend: client.backend_name(),
            what: Capability::Peek.to_string(),
            hint: "this broker keeps no presence: nothing says which crontabs run",
        });
    }
    let crontabs = announced_crontabs(client)
        .await
        .context(|| "reading the crontab registry".to_owned())?;
    let shown: Vec<Crontab> = crontabs.iter().cloned().map(Crontab::from).collect();
    if json {
        return print_json(&shown);
    }
    if crontabs.is_empty() {
        return print_text("no crontab running\n");
    }
    let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map_or_else(
            || "-".to_owned(),
            |t| t.format("%Y-%m-%d %H:%M:%SZ").to_string(),
        )
    };
    let mut table = Table::new([
        "NAME",
        "SPEC",
        "TZ",
        "LAST TICK RUN",
        "NEXT TICK",
        "PARTICIPANTS",
    ]);
    for c in &crontabs {
        table.row([
            c.name.clone(),
            c.spec.clone(),
            c.timezone.clone(),
            time(c.last_tick),
            time(c.next_tick),
            c.participants.len().to_string(),
        ]);
    }
    print_text(&table.render())
}

/// Runs `ezmq cron history NAME`.
pub(crate) async fn history(client: &Client, args: CronHistoryArgs, json: bool) -> CliResult<()> {
    super::require(
        client,
        Capability::Peek,
        "a crontab's history is read with peek; RabbitMQ schedulers keep none",
    )?;
    let runs = ezmq::crontab::cron_history(client, &args.name, args.count)
        .await
        .context(|| format!("reading the history of crontab {:?}", args.name))?;
    if json {
        return print_json(&runs);
    }
    if runs.is_empty() {
        return print_text(&format!("no run of {} recorded\n", args.name));
    }
    let mut table = Table::new(["TICK", "BY", "STARTED", "DURATION", "OUTCOME", "ERROR"]);
    for run in &runs {
        table.row([
            run.tick.format("%Y-%m-%d %H:%M:%SZ").to_string(),
            run.participant.clone(),
            run.started_at.format("%H:%M:%S%.3f").to_string(),
            format!("{} ms", run.duration_ms),
            run.outcome.name().to_owned(),
            run.error
                .as_deref()
                .map_or_else(|| "-".to_owned(), |e| crate::table::clip(e, 60)),
        ]);
    }
    print_text(&table.render())
}
