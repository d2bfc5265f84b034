//! `ezmq stats [TOPIC...] [--watch [INTERVAL]]`: waiting, in-flight and
//! dead-lettered jobs per topic (every topic on the broker without
//! TOPIC), once or as a live table.

use std::io::Write;
use std::time::Duration;

use ezmq::spi::Capability;
use ezmq::{Admin, Client, FlowStatus, MqClient, Topic};
use serde::Serialize;

use crate::args::StatsArgs;
use crate::exit::{CliResult, Context};
use crate::table::{print_json, print_text, Table};

/// The numbers of one topic.
#[derive(Debug, Serialize)]
struct TopicStats {
    topic: String,
    /// Waiting to be delivered (not delayed, not in flight).
    waiting: u64,
    /// Scheduled (delayed) or retrying (waiting for a backoff); `null`
    /// when the broker cannot tell (no job store).
    scheduled: Option<u64>,
    /// Delivered and not settled yet; `null` when the broker cannot tell.
    in_flight: Option<u64>,
    /// Waiting in `<topic>.dead-letter`.
    dead_letters: u64,
    /// Paused cluster-wide (`ezmq pause`); `null` when the broker cannot
    /// pause topics.
    paused: Option<bool>,
    /// The cluster-wide limits the topic's listeners run with, e.g.
    /// `50/1s burst 5, 5 at once`; `null` without any (or when the broker
    /// has no claims to publish them in).
    limits: Option<String>,
    /// True when a listener waited for those limits in the last 5 s: the
    /// waiting jobs are held back by them. `null` when the broker cannot
    /// tell.
    held_back: Option<bool>,
}

/// Runs `ezmq stats`.
pub(crate) async fn run(client: &Client, args: StatsArgs, json: bool) -> CliResult<()> {
    super::require(
        client,
        Capability::QueueStats,
        "the broker's own tools show its queue lengths",
    )?;
    let mut topics = Vec::with_capacity(args.topics.len());
    for name in &args.topics {
        topics.push(with_dead_letters(super::topic(name)?)?);
    }
    let Some(interval) = args.watch else {
        let stats = collect(client, &topics).await?;
        return if json {
            print_json(&stats)
        } else {
            print_text(&render(&stats))
        };
    };
    watch(client, &topics, interval, json).await
}

/// `topic` with its dead-letter topic.
fn with_dead_letters(topic: Topic) -> CliResult<(Topic, Topic)> {
    let dead = super::topic(&format!("{topic}{DEAD_LETTER_SUFFIX}"))?;
    Ok((topic, dead))
}

/// What a dead-letter topic's name ends with.
const DEAD_LETTER_SUFFIX: &str = ".dead-letter";

/// Reads the numbers of every topic in `topics`, or of every topic on the
/// broker ([`Admin::topics`]) when it is empty.
async fn collect(client: &Client, topics: &[(Topic, Topic)]) -> CliResult<Vec<TopicStats>> {
    if !client.capabilities().has(Capability::QueueStats) {
        return Err(crate::exit::CliError::CapabilityMissing {
            backend: client.backend_name(),
            what: Capability::QueueStats.to_string(),
            hint: "the broker's own tools show its queue lengths",
        });
    }
    let admin = client.admin();
    let all;
    let topics = if topics.is_empty() {
        all = super::topics::all(client)
            .await?
            .into_iter()
            .filter(|t| !t.as_str().ends_with(DEAD_LETTER_SUFFIX))
            .map(with_dead_letters)
            .collect::<CliResult<Vec<_>>>()?;
        &all
    } else {
        topics
    };
    let reads = topics.iter().map(|(topic, dead)| read(admin, topic, dead));
    futures::future::try_join_all(reads).await
}

async fn read(admin: Admin<'_>, topic: &Topic, dead: &Topic) -> CliResult<TopicStats> {
    let (waiting, scheduled, in_flight, dead_letters, paused, flow) = tokio::try_join!(
        admin.queue_len(topic),
        scheduled(admin, topic),
        admin.in_flight(topic),
        admin.queue_len(dead),
        paused(admin, topic),
        flow(admin, topic),
    )
    .context(|| format!("reading the stats of {topic:?}"))?;
    Ok(TopicStats {
        topic: topic.to_string(),
        waiting,
        scheduled,
        in_flight,
        dead_letters,
        paused,
        limits: flow
            .as_ref()
            .and_then(|f| f.limits.as_ref())
            .map(ToString::to_string),
        held_back: flow.as_ref().map(|f| f.held_back),
    })
}

/// The topic's flow control, where the backend can publish it.
async fn flow(admin: Admin<'_>, topic: &Topic) -> ezmq::Result<Option<FlowStatus>> {
    if !admin.capabilities().has(Capability::ExclusiveClaim) {
        return Ok(None);
    }
    admin.flow(topic).await.map(Some)
}

/// Whether the topic is paused, where the backend can pause topics.
async fn paused(admin: Admin<'_>, topic: &Topic) -> ezmq::Result<Option<bool>> {
    if !admin.capabilities().has(Capability::ExclusiveClaim) {
        return Ok(None);
    }
    admin.is_paused(topic).await.map(Some)
}

/// Scheduled plus retrying jobs, where the backend has a job store.
async fn scheduled(admin: Admin<'_>, topic: &Topic) -> ezmq::Result<Option<u64>> {
    if !admin.capabilities().has(Capability::JobStore) {
        return Ok(None);
    }
    admin.scheduled_len(topic).await.map(Some)
}

fn render(stats: &[TopicStats]) -> String {
    let mut table = Table::new([
        "TOPIC",
        "WAITING",
        "SCHEDULED",
        "IN-FLIGHT",
        "DEAD-LETTERS",
        "PAUSED",
        "LIMITS",
        "HELD BACK",
    ]);
    for s in stats {
        table.row([
            s.topic.clone(),
            s.waiting.to_string(),
            s.scheduled
                .map_or_else(|| "-".to_owned(), |n| n.to_string()),
            s.in_flight
                .map_or_else(|| "-".to_owned(), |n| n.to_string()),
            s.dead_letters.to_string(),
            yes_no(s.paused),
            s.limits.clone().unwrap_or_else(|| "-".to_owned()),
            yes_no(s.held_back),
        ]);
    }
    table.render()
}

/// `yes`, `no`, or `-` when the broker cannot tell.
fn yes_no(value: Option<bool>) -> String {
    match value {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
    .to_owned()
}

/// Shows the table every `interval` until Ctrl-C: redrawn in place on a
/// terminal, one frame after another (a blank line between them, no
/// control codes) when stdout is a pipe or a file. A failed read shows its
/// error in place of the table and the next refresh tries again.
async fn watch(
    client: &Client,
    topics: &[(Topic, Topic)],
    interval: Duration,
    json: bool,
) -> CliResult<()> {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let redraw = crate::term::stdout_is_terminal();
    let mut first = true;
    loop {
        tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            _ = ticker.tick() => {}
        }
        let now = chrono::Utc::now().format("%Y-%m-%d %H:%M:%SZ");
        let frame = collect(client, topics).await;
        let mut out = std::io::stdout().lock();
        if json {
            match frame {
                Ok(stats) => {
                    let line = serde_json::json!({ "at": now.to_string(), "topics": stats });
                    writeln!(out, "{line}")?;
                }
                Err(err) => {
                    let line =
                        serde_json::json!({ "at": now.to_string(), "error": err.to_string() });
                    writeln!(out, "{line}")?;
                }
            }
        } else {
            if redraw {
                // Clear the screen, cursor home, then the frame.
                write!(out, "\x1b[2J\x1b[H")?;
            } else if !first {
                writeln!(out)?;
            }
            first = false;
            writeln!(
                out,
                "{} at {}, every {}; Ctrl-C to stop\n",
                client_label(client),
                now,
                humantime::format_duration(interval)
            )?;
            match frame {
                Ok(stats) => write!(out, "{}", render(&stats))?,
                Err(err) => writeln!(out, "error: {err}")?,
            }
        }
        out.flush()?;
    }
}

fn client_label(client: &Client) -> &'static str {
    use ezmq::MqClient;
    client.backend_name()
}
