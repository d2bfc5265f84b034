//! Redis and RabbitMQ rows: the ezmq client against a raw client loop of
//! the same broker, in the same run (raw and ezmq alternate, cell by
//! cell): push throughput, consume throughput on a pre-filled queue, and
//! push → handler latency at fixed rates (and the batch scenario of
//! [`crate::scenario::batch`]).
//!
//! Each broker implements [`RawBroker`] (its raw baseline and its ezmq
//! client); the measuring code here is shared.

mod latency_rows;

pub(crate) mod kafka;
pub(crate) mod nats;
pub(crate) mod postgres;
pub(crate) mod rabbitmq;
pub(crate) mod redis;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ezmq_core::{Client, ConsumeOptions, MqClient};
use futures::future::BoxFuture;
use tokio::task::{JoinHandle, JoinSet};

use crate::scenario::batch::{self, BatchBroker};
use crate::scenario::latency::Recorder;
use crate::scenario::{drain, rate_limit};
use crate::scenario::{unique_queue, Imp, Settings, FETCH_WAIT};
use crate::stats::{ms, process_cpu, rate, us};
use crate::table::{ratio, verdict, Table};
use crate::BoxResult;

/// Sends one message with the given body to a fixed queue and resolves
/// once the broker has it (XADD reply, publisher confirm).
pub(crate) type Sender = Arc<dyn Fn(Bytes) -> BoxFuture<'static, BoxResult<()>> + Send + Sync>;

/// The throughput goals: ezmq reaches this share of the raw loop.
const GOAL_RATIO: f64 = 0.90;
/// Push tasks of the push goal.
const GOAL_TASKS: usize = 128;
/// Body of the push, consume and latency messages.
const BODY_LEN: usize = 12;
/// Longest a drain may take before the run counts as failed.
const DRAIN_LIMIT: Duration = Duration::from_secs(120);
/// Concurrent senders filling a queue before a consume run.
const PREFILL_TASKS: usize = 64;

/// One broker's raw baseline and ezmq client.
pub(crate) trait RawBroker {
    /// Name in titles and goals (`Redis`).
    fn name(&self) -> &'static str;
    /// Whether this broker's rows are judged against the goals (false for
    /// reference rows).
    fn has_goals(&self) -> bool {
        true
    }
    /// The throughput goal: ezmq's share of the raw loop (push at
    /// [`GOAL_TASKS`] tasks, consume).
    fn goal_ratio(&self) -> f64 {
        GOAL_RATIO
    }
    /// The latency goal: ezmq's p99 push → handler at
    /// [`RawBroker::latency_goal_rate`].
    fn p99_goal(&self) -> Duration;
    /// The offered rate (msg/s) the latency goal is judged at.
    fn latency_goal_rate(&self) -> u64 {
        1_000
    }
    /// The offered rates of the latency table.
    fn latency_rates(&self, s: &Settings) -> Vec<u64> {
        s.latency_rates.clone()
    }
    /// Added to a latency run's warm-up (and length): how long a new
    /// consumer takes to get its first message on this broker (Kafka: its
    /// group's join), so that the measured part is the steady state.
    fn latency_join(&self) -> Duration {
        Duration::ZERO
    }
    /// What the raw side sends, for the notes under the tables.
    fn raw_notes(&self) -> RawNotes;
    /// A new ezmq client with its defaults.
    async fn ezmq(&self) -> BoxResult<Client>;
    /// A raw sender to `queue` (creating what the raw side needs first,
    /// e.g. the queue, declared as ezmq declares it).
    async fn raw_sender(&self, queue: &str) -> BoxResult<Sender>;
    /// The raw consume loop: takes `n` messages from the pre-filled
    /// `queue`, `k` in flight, acknowledging them; returns the time taken.
    async fn raw_consume(&self, queue: &str, n: u64, k: usize) -> BoxResult<Duration>;
    /// Starts a raw consumer of `queue` that records every message in
    /// `rec` until `stop` is set.
    async fn raw_receiver(
        &self,
        queue: &str,
        k: usize,
        rec: Arc<Recorder>,
        stop: Arc<AtomicBool>,
    ) -> BoxResult<JoinHandle<BoxResult<()>>>;
    /// Deletes what a run left behind on `queue`.
    async fn cleanup(&self, queue: &str) -> BoxResult<()>;
}

/// Descriptions of the raw side, printed under the tables.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawNotes {
    /// Column header of the raw push.
    pub(crate) push_col: &'static str,
    /// Column header of the raw consume loop.
    pub(crate) consume_col: &'static str,
    /// What the raw push does.
    pub(crate) push: &'static str,
    /// What the raw consume loop does.
    pub(crate) consume: &'static str,
    /// What the raw latency consumer does.
    pub(crate) latency: &'static str,
}

/// Which parts of a broker run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Parts {
    /// Push throughput.
    pub(crate) push: bool,
    /// Consume throughput.
    pub(crate) consume: bool,
    /// Push → handler latency.
    pub(crate) latency: bool,
    /// Push batch of 50 ([`crate::scenario::batch`]).
    pub(crate) batch: bool,
    /// Consume with a rate limit that does not bite
    /// ([`crate::scenario::rate_limit`]).
    pub(crate) rate_limit: bool,
}

impl Parts {
    /// Whether any part runs.
    pub(crate) fn any(self) -> bool {
        self.push || self.consume || self.latency || self.batch || self.rate_limit
    }
}

/// Runs the chosen parts for broker `b`; prints its tables and adds its
/// goals to `goals`.
pub(crate) async fn run<B: RawBroker + BatchBroker>(
    b: &B,
    s: &Settings,
    parts: Parts,
    goals: &mut Table,
) -> BoxResult<()> {
    let both = s.runs(Imp::Raw) && s.runs(Imp::Ezmq) && b.has_goals();
    if parts.push {
        let (t, r) = push(b, s).await?;
        println!("{}", t.render());
        if let Some(r) = r.filter(|_| both) {
            goals.row(vec![
                format!(
                    "{}: push {BODY_LEN} B, {GOAL_TASKS} tasks: ezmq ≥ {:.0} % of raw",
                    b.name(),
                    b.goal_ratio() * 100.0
                ),
                format!("{:.0} %", r * 100.0),
                verdict(r >= b.goal_ratio()),
            ]);
        }
    }
    if parts.batch {
        batch::run(b, s, goals).await?;
    }
    if parts.consume {
        let (t, r) = consume(b, s).await?;
        println!("{}", t.render());
        if both {
            goals.row(vec![
                format!(
                    "{}: consume: listener ≥ {:.0} % of raw loop",
                    b.name(),
                    b.goal_ratio() * 100.0
                ),
                format!("{:.0} %", r * 100.0),
                verdict(r >= b.goal_ratio()),
            ]);
        }
    }
    if parts.rate_limit && !rate_limits(b).await? {
        println!(
            "skipped: {} lacks rate limits across processes: the rate-limit rows\n",
            b.name()
        );
    } else if parts.rate_limit {
        let (t, r) = rate_limit::run(&Limited(b), s).await?;
        println!("{}", t.render());
        if b.has_goals() {
            goals.row(vec![
                format!(
                    "{}: consume with a rate limit that does not bite ≥ 85 % of plain",
                    b.name()
                ),
                format!("{:.0} %", r * 100.0),
                verdict(r >= rate_limit::GOAL_RATIO),
            ]);
        }
    }
    if parts.latency {
        let (t, p99) = latency_rows::latency_table(b, s).await?;
        println!("{}", t.render());
        if let Some((p99, complete)) = p99.filter(|_| b.has_goals()) {
            goals.row(vec![
                format!(
                    "{}: latency: p99 push → handler < {} ms at {} msg/s",
                    b.name(),
                    b.p99_goal().as_millis(),
                    b.latency_goal_rate()
                ),
                format!("{} ms", ms(p99)),
                verdict(p99 < b.p99_goal() && complete),
            ]);
        }
    }
    Ok(())
}

/// Whether `b`'s ezmq client has rate limits (and priorities) to measure.
async fn rate_limits<B: RawBroker>(b: &B) -> BoxResult<bool> {
    let client = b.ezmq().await?;
    let has = client
        .capabilities()
        .has(ezmq_core::spi::Capability::RateLimit);
    client.shutdown(Duration::from_secs(1)).await?;
    Ok(has)
}

/// A broker as the subject of the rate-limit rows.
struct Limited<'a, B>(&'a B);

impl<B: RawBroker> rate_limit::Subject for Limited<'_, B> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    async fn client(&self) -> BoxResult<Client> {
        self.0.ezmq().await
    }

    async fn cleanup(&self, queue: &str) -> BoxResult<()> {
        self.0.cleanup(queue).await
    }
}

/// The ezmq push as a [`Sender`].
fn ezmq_sender(client: &Client, queue: &str) -> Sender {
    let (client, queue) = (client.clone(), queue.to_owned());
    Arc::new(move |body| {
        let (client, queue) = (client.clone(), queue.clone());
        Box::pin(async move {
            client.push(&queue, body).await?;
            Ok(())
        })
    })
}

/// Push throughput from 1/16/128 tasks; returns the table and the
/// ezmq/raw ratio at [`GOAL_TASKS`].
async fn push<B: RawBroker>(b: &B, s: &Settings) -> BoxResult<(Table, Option<f64>)> {
    let notes = b.raw_notes();
    let goal_col = format!("goal ≥ {:.0} % at 128", b.goal_ratio() * 100.0);
    let mut table = Table::new(
        format!(
            "{}: push throughput, {BODY_LEN} B (msg/s, best of the repeats)",
            b.name()
        ),
        &[
            "tasks",
            notes.push_col,
            "ezmq push",
            "ezmq / raw",
            "CPU µs/msg raw",
            "CPU µs/msg ezmq",
            goal_col.as_str(),
        ],
    );
    table.note(format!(
        "Each cell: {} s warm-up, then {} s measured; {} repeat(s), raw and ezmq alternating, \
         a fresh queue per cell. Raw: {} ezmq: one client shared by the tasks, \
         `client.push(topic, body)`. CPU µs/msg: user+system CPU of the bench process \
         (client only; the broker is another process) per push, from the best repeat.",
        s.push_warm.as_secs_f64(),
        s.push_measure.as_secs_f64(),
        s.repeats,
        notes.push,
    ));
    let body = Bytes::from(vec![b'x'; BODY_LEN]);
    let mut goal_ratio = None;
    for &tasks in &s.push_tasks {
        let mut best = [(0f64, None::<Duration>); 2];
        for _ in 0..s.repeats {
            for (i, imp) in [Imp::Raw, Imp::Ezmq].into_iter().enumerate() {
                if !s.runs(imp) {
                    continue;
                }
                let queue = unique_queue("push");
                let client = match imp {
                    Imp::Ezmq => Some(b.ezmq().await?),
                    Imp::Raw => None,
                };
                let sender = match &client {
                    Some(client) => ezmq_sender(client, &queue),
                    None => b.raw_sender(&queue).await?,
                };
                let cell = push_cell(sender, tasks, body.clone(), s).await?;
                if let Some(client) = client {
                    client.shutdown(Duration::from_secs(1)).await?;
                }
                b.cleanup(&queue).await?;
                if cell.0 > best[i].0 {
                    best[i] = cell;
                }
            }
        }
        let (raw, ezmq) = (best[0].0, best[1].0);
        let goal = if tasks == GOAL_TASKS && raw > 0.0 && ezmq > 0.0 {
            let r = ezmq / raw;
            goal_ratio = Some(r);
            verdict(r >= b.goal_ratio())
        } else {
            String::new()
        };
        table.row(vec![
            tasks.to_string(),
            rate(raw),
            rate(ezmq),
            ratio(ezmq, raw),
            us(best[0].1),
            us(best[1].1),
            goal,
        ]);
    }
    Ok((table, goal_ratio))
}

/// Sends from `tasks` tasks for the warm-up and the measuring window;
/// returns sends per second and CPU per send in the window.
async fn push_cell(
    sender: Sender,
    tasks: usize,
    body: Bytes,
    s: &Settings,
) -> BoxResult<(f64, Option<Duration>)> {
    // One untimed send opens the connections and declares the queue.
    sender(body.clone()).await?;
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut set: JoinSet<BoxResult<()>> = JoinSet::new();
    for _ in 0..tasks {
        let (done, stop, body, sender) = (
            Arc::clone(&done),
            Arc::clone(&stop),
            body.clone(),
            Arc::clone(&sender),
        );
        set.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                sender(body.clone()).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        });
    }
    crate::stats::measure_window(s.push_warm, s.push_measure, &done, &stop, &mut set).await
}

/// Fills `queue` with `n` messages through `sender`; not timed.
async fn prefill(sender: &Sender, n: u64) -> BoxResult<()> {
    let left = Arc::new(AtomicU64::new(n));
    let body = Bytes::from(vec![b'p'; BODY_LEN]);
    let mut set: JoinSet<BoxResult<()>> = JoinSet::new();
    for _ in 0..PREFILL_TASKS {
        let (left, body, sender) = (Arc::clone(&left), body.clone(), Arc::clone(sender));
        set.spawn(async move {
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1))
                .is_ok()
            {
                sender(body.clone()).await?;
            }
            Ok(())
        });
    }
    while let Some(result) = set.join_next().await {
        result??;
    }
    Ok(())
}

/// Consume throughput on a pre-filled queue; returns the table and the
/// ezmq/raw ratio.
async fn consume<B: RawBroker>(b: &B, s: &Settings) -> BoxResult<(Table, f64)> {
    let (n, k) = (s.broker_consume_jobs, s.consume_concurrency);
    let notes = b.raw_notes();
    let goal_col = format!("goal ≥ {:.0} %", b.goal_ratio() * 100.0);
    let mut table = Table::new(
        format!(
            "{}: consume throughput on a pre-filled queue (msg/s, best of the repeats)",
            b.name()
        ),
        &[
            "messages",
            notes.consume_col,
            "ezmq listener",
            "ezmq / raw",
            "CPU µs/msg raw",
            "CPU µs/msg ezmq",
            goal_col.as_str(),
        ],
    );
    table.note(format!(
        "Queue pre-filled with {n} messages of {BODY_LEN} B before each run (raw sends, not \
         timed). Raw: {} ezmq: `add_consume_listener_with(q, concurrency {k})`, a handler that \
         only counts, auto-ack; timed from the listener start until the last handler \
         returned (its ack batch still in flight). {} repeat(s), raw and ezmq alternating, \
         each side first in every other repeat.",
        notes.consume,
        consume_repeats(s)
    ));
    let mut best = [(0f64, None::<Duration>); 2];
    for repeat in 0..consume_repeats(s) {
        for (i, imp) in alternating(repeat) {
            if !s.runs(imp) {
                continue;
            }
            let queue = unique_queue("consume");
            prefill(&b.raw_sender(&queue).await?, n).await?;
            let cpu0 = process_cpu();
            let elapsed = match imp {
                Imp::Raw => b.raw_consume(&queue, n, k).await?,
                Imp::Ezmq => {
                    let client = b.ezmq().await?;
                    let options = ConsumeOptions::new()
                        .with_concurrency(k)
                        .with_fetch_wait(FETCH_WAIT);
                    let elapsed = drain::listener(&client, &queue, n, options).await;
                    client.shutdown(Duration::from_secs(1)).await?;
                    elapsed?
                }
            };
            let cpu = drain::per_job(cpu0, process_cpu(), n);
            b.cleanup(&queue).await?;
            let per_sec = n as f64 / elapsed.as_secs_f64();
            if per_sec > best[i].0 {
                best[i] = (per_sec, cpu);
            }
        }
    }
    let (raw, ezmq) = (best[0].0, best[1].0);
    let r = ezmq / raw.max(1.0);
    table.row(vec![
        n.to_string(),
        rate(raw),
        rate(ezmq),
        ratio(ezmq, raw),
        us(best[0].1),
        us(best[1].1),
        if raw > 0.0 && ezmq > 0.0 {
            verdict(r >= b.goal_ratio())
        } else {
            String::new()
        },
    ]);
    Ok((table, r))
}

/// Repeats of a consume cell: one more than the push cells', as the
/// noisiest goal cells get.
pub(crate) fn consume_repeats(s: &Settings) -> usize {
    s.repeats + 1
}

/// Raw then ezmq on even repeats, ezmq then raw on odd ones (with each
/// side's index in the results), so neither always runs on a broker the
/// other just loaded.
pub(crate) fn alternating(repeat: usize) -> [(usize, Imp); 2] {
    if repeat.is_multiple_of(2) {
        [(0, Imp::Raw), (1, Imp::Ezmq)]
    } else {
        [(1, Imp::Ezmq), (0, Imp::Raw)]
    }
}

/// True when `EZMQ_REQUIRE_BROKERS` (comma-separated backend names, or
/// `all`) names `backend`: an unreachable broker is then an error, not a
/// skip.
pub(crate) fn required(backend: &str) -> bool {
    std::env::var("EZMQ_REQUIRE_BROKERS").is_ok_and(|v| {
        v.split(',')
            .map(str::trim)
            .any(|b| b.eq_ignore_ascii_case("all") || b.eq_ignore_ascii_case(backend))
    })
}
