//! Push batch of 50 (issue 28), on every backend: ezmq's
//! `client.push_batch(topic, 50 jobs)` against the cheapest raw way of
//! sending the same 50 messages on that broker (one pipeline, pipelined
//! commands, or 50 publishes and one wait for their confirms), from 1 and
//! 16 tasks, each looping "send a batch, await it".
//!
//! The measuring code is here; each broker implements [`BatchBroker`]
//! next to its other raw loops (`disque` below, `brokers::redis::batch`,
//! `brokers::rabbitmq::batch`).

pub(crate) mod disque;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ezmq_core::{Client, MqClient, PushOptions};
use futures::future::BoxFuture;
use tokio::task::JoinSet;

use crate::brokers::alternating;
use crate::scenario::{unique_queue, Imp, Settings};
use crate::stats::{rate, us};
use crate::table::{ratio, verdict, Table};
use crate::BoxResult;

/// Jobs in one batch.
pub(crate) const BATCH_LEN: usize = 50;
/// The batch goal (issue 28): ezmq reaches this share of the raw batch.
pub(crate) const GOAL_RATIO: f64 = 0.90;
/// Concurrent tasks of the cells, each sending one batch at a time.
const TASKS: [usize; 2] = [1, 16];
/// Body of every job.
const BODY_LEN: usize = 12;

/// Sends one batch (the bodies, in order) to a fixed queue and resolves
/// once the broker has every message of it (replies, confirms).
pub(crate) type BatchSender =
    Arc<dyn Fn(Arc<[Bytes]>) -> BoxFuture<'static, BoxResult<()>> + Send + Sync>;

/// One broker's raw batch and its ezmq client.
pub(crate) trait BatchBroker {
    /// Name in titles and goals (`Redis`).
    fn batch_name(&self) -> &'static str;
    /// Column header of the raw batch (`raw pipeline of 50 XADD`).
    fn raw_batch_col(&self) -> &'static str;
    /// What the raw batch sends, for the note under the table.
    fn raw_batch_note(&self) -> &'static str;
    /// A new ezmq client with its defaults.
    async fn batch_ezmq(&self) -> BoxResult<Client>;
    /// A raw batch sender to `queue` (creating what the raw side needs
    /// first, e.g. the queue, declared as ezmq declares it).
    async fn raw_batch_sender(&self, queue: &str) -> BoxResult<BatchSender>;
    /// Deletes what a run left behind on `queue`.
    async fn batch_cleanup(&self, queue: &str) -> BoxResult<()>;
}

/// The ezmq side: `client.push_batch(queue, jobs)` with default options;
/// fails when one job of the batch failed.
fn ezmq_batch_sender(client: &Client, queue: &str) -> BatchSender {
    let (client, queue) = (client.clone(), queue.to_owned());
    Arc::new(move |bodies: Arc<[Bytes]>| {
        let (client, queue) = (client.clone(), queue.clone());
        Box::pin(async move {
            let jobs = bodies
                .iter()
                .map(|body| (body.clone(), PushOptions::default()))
                .collect();
            for result in client.push_batch(&queue, jobs).await? {
                result?;
            }
            Ok(())
        })
    })
}

/// Runs the scenario on broker `b`: prints its table and adds a goal row
/// per task count to `goals` (when both sides ran).
pub(crate) async fn run<B: BatchBroker>(b: &B, s: &Settings, goals: &mut Table) -> BoxResult<()> {
    let mut table = Table::new(
        format!(
            "{}: push batch of {BATCH_LEN}, {BODY_LEN} B (msg/s, best of the repeats)",
            b.batch_name()
        ),
        &[
            "tasks",
            b.raw_batch_col(),
            "ezmq push_batch",
            "ezmq / raw",
            "CPU µs/msg raw",
            "CPU µs/msg ezmq",
            "goal ≥ 90 %",
        ],
    );
    table.note(format!(
        "Each cell: {} s warm-up, then {} s measured; every task loops \"send a batch of \
         {BATCH_LEN}, await it\". {} repeat(s), raw and ezmq alternating (each side first in \
         every other repeat), a fresh queue per cell. Raw: {} ezmq: one client shared by the \
         tasks, `client.push_batch(topic, 50 × (body, PushOptions::default()))`, every job's \
         result checked. msg/s counts messages (batches × {BATCH_LEN}). CPU µs/msg: \
         user+system CPU of the bench process per message, from the best repeat.",
        s.push_warm.as_secs_f64(),
        s.push_measure.as_secs_f64(),
        s.repeats,
        b.raw_batch_note(),
    ));
    let bodies: Arc<[Bytes]> = (0..BATCH_LEN)
        .map(|_| Bytes::from(vec![b'x'; BODY_LEN]))
        .collect();
    let both = s.runs(Imp::Raw) && s.runs(Imp::Ezmq);
    for tasks in TASKS {
        let mut best = [(0f64, None::<Duration>); 2];
        for repeat in 0..s.repeats {
            for (i, imp) in alternating(repeat) {
                if !s.runs(imp) {
                    continue;
                }
                let queue = unique_queue("batch");
                let client = match imp {
                    Imp::Ezmq => Some(b.batch_ezmq().await?),
                    Imp::Raw => None,
                };
                let sender = match &client {
                    Some(client) => ezmq_batch_sender(client, &queue),
                    None => b.raw_batch_sender(&queue).await?,
                };
                let cell = batch_cell(sender, tasks, Arc::clone(&bodies), s).await;
                if let Some(client) = client {
                    client.shutdown(Duration::from_secs(1)).await?;
                }
                b.batch_cleanup(&queue).await?;
                let cell = cell?;
                if cell.0 > best[i].0 {
                    best[i] = cell;
                }
            }
        }
        let (raw, ezmq) = (best[0].0, best[1].0);
        let goal = if both && raw > 0.0 {
            let r = ezmq / raw;
            goals.row(vec![
                format!(
                    "{}: push batch of {BATCH_LEN}, {tasks} task(s): ezmq ≥ 90 % of raw",
                    b.batch_name()
                ),
                format!("{:.0} %", r * 100.0),
                verdict(r >= GOAL_RATIO),
            ]);
            verdict(r >= GOAL_RATIO)
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
    println!("{}", table.render());
    Ok(())
}

/// Sends batches from `tasks` tasks for the warm-up and the measuring
/// window; returns messages per second and CPU per message in the window.
async fn batch_cell(
    sender: BatchSender,
    tasks: usize,
    bodies: Arc<[Bytes]>,
    s: &Settings,
) -> BoxResult<(f64, Option<Duration>)> {
    // One untimed batch opens the connections and declares the queue.
    sender(Arc::clone(&bodies)).await?;
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut set: JoinSet<BoxResult<()>> = JoinSet::new();
    for _ in 0..tasks {
        let (done, stop, bodies, sender) = (
            Arc::clone(&done),
            Arc::clone(&stop),
            Arc::clone(&bodies),
            Arc::clone(&sender),
        );
        set.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                sender(Arc::clone(&bodies)).await?;
                done.fetch_add(BATCH_LEN as u64, Ordering::Relaxed);
            }
            Ok(())
        });
    }
    crate::stats::measure_window(s.push_warm, s.push_measure, &done, &stop, &mut set).await
}
