//! `ezmq cron list`: the crontabs announced by running schedulers
//! ([`ezmq::crontab::announced_crontabs`]), with their last tick run and
//! their next tick.

use ezmq::crontab::{announced_crontabs, CrontabStatus};
use ezmq::spi::Capability;
use ezmq::Client;
use serde::Serialize;

use crate::exit::{CliResult, Context};
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
    super::require(
        client,
        Capability::Peek,
        "the crontab registry is read with peek; RabbitMQ schedulers do not announce",
    )?;
    let crontabs = announced_crontabs(client)
        .await
        .context(|| "reading the crontab registry".to_owned())?;
    let shown: Vec<Crontab> = crontabs.iter().cloned().map(Crontab::from).collect();
    if json {
        return print_json(&shown);
    }
    if crontabs.is_empty() {
        return print_text("no crontab announced\n");
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
