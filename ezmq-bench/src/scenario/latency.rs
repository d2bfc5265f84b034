//! End-to-end latency push → handler start at a fixed offered rate, on one
//! topic and on a mixed 20-topic workload.
//!
//! The body carries the time the push was issued (nanoseconds since a
//! common `Instant`). The producer is open-loop: every push is its own task,
//! so a slow push never delays the next one (no coordinated omission); the
//! achieved send rate is reported beside the offered one.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ezmq_disque::{ConsumeOptions, MqClient, MqClientExt};
use tokio::task::JoinSet;

use crate::scenario::{unique_queue, Imp, Settings};
use crate::stats::{ms, rate, Latency};
use crate::table::{verdict, Table};
use crate::target::Target;
use crate::{raw, BoxResult};

/// The latency goal: p99 below this at 1k msg/s.
const GOAL_P99: Duration = Duration::from_millis(2);
/// How long receivers may lag behind the last send before the run ends.
pub(crate) const TAIL_WAIT: Duration = Duration::from_secs(10);

/// One latency workload.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    /// Topics the load is spread over (round-robin).
    pub(crate) topics: usize,
    /// Body size (at least the 8-byte send stamp).
    pub(crate) body_len: usize,
    /// Offered rate, msg/s over all topics.
    pub(crate) rate: u64,
    /// Length of the run.
    pub(crate) time: Duration,
    /// Samples sent during this first part are dropped.
    pub(crate) warm: Duration,
    /// Listener concurrency per topic (and raw `GETJOB COUNT`).
    pub(crate) concurrency: usize,
}

/// What a run measured.
#[derive(Debug, Default)]
pub(crate) struct Measured {
    /// Percentiles of the samples after the warm-up.
    pub(crate) latency: Latency,
    /// Messages sent.
    pub(crate) sent: u64,
    /// Messages received (warm-up included).
    pub(crate) received: u64,
    /// Sends per second achieved.
    pub(crate) send_rate: f64,
}

/// Samples shared between the receivers of a run.
#[derive(Debug)]
pub(crate) struct Recorder {
    base: Instant,
    /// Send times before this (ns since `base`) are warm-up;
    /// set when the producer starts.
    cutoff: AtomicU64,
    received: AtomicU64,
    samples: Mutex<Vec<u64>>,
}

impl Recorder {
    /// A recorder whose stamps count from `base`.
    pub(crate) fn new(base: Instant) -> Self {
        Recorder {
            base,
            cutoff: AtomicU64::new(u64::MAX),
            received: AtomicU64::new(0),
            samples: Mutex::new(Vec::new()),
        }
    }

    /// Messages received so far.
    pub(crate) fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Waits until `sent` messages were received or `limit` passed.
    pub(crate) async fn wait_for(&self, sent: u64, limit: Duration) {
        let tail = Instant::now();
        while self.received() < sent && tail.elapsed() < limit {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// What was measured, taking the samples.
    pub(crate) fn measured(&self, sent: u64, send_rate: f64) -> Measured {
        let samples = self
            .samples
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        Measured {
            latency: Latency::from_nanos(samples),
            sent,
            received: self.received(),
            send_rate,
        }
    }

    /// Marks the start of sending: samples sent within `warm` from now are
    /// dropped.
    pub(crate) fn start_now(&self, warm: Duration) {
        let now = self.base.elapsed().as_nanos() as u64;
        self.cutoff
            .store(now + warm.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Records the arrival of a message whose body starts with its send
    /// stamp.
    pub(crate) fn record(&self, body: &[u8]) {
        let now = self.base.elapsed().as_nanos() as u64;
        self.received.fetch_add(1, Ordering::Relaxed);
        let Some(stamp) = body.get(..8) else { return };
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(stamp);
        let sent = u64::from_le_bytes(bytes);
        if sent >= self.cutoff.load(Ordering::Relaxed) {
            if let Ok(mut samples) = self.samples.lock() {
                samples.push(now.saturating_sub(sent));
            }
        }
    }
}

/// Runs the single-topic runs (one per offered rate) and the mixed run.
/// Returns the tables and the ezmq p99 at 1k msg/s, when measured.
pub(crate) async fn run(
    target: &Target,
    s: &Settings,
) -> BoxResult<(Vec<Table>, Option<Duration>)> {
    let mut single = table(
        "Latency push → handler start, one topic, 12 B bodies (ms)",
        "goal p99 < 2 ms @1k",
    );
    single.note(format!(
        "Each run: {} s at the offered rate, the first {} s dropped as warm-up. \
         ezmq: pushes from a pacing task (1 ms ticks, each push a task), one listener with \
         concurrency 64, latency taken when the handler starts. Raw: the same pacing with \
         `ADDJOB` on a multiplexed connection; one `GETJOB TIMEOUT 100 COUNT 64` loop on a \
         dedicated connection, latency taken when GETJOB returns, ACKs pipelined in the \
         background. Latency is measured from the moment the push is issued.",
        s.latency_time.as_secs_f64(),
        s.latency_warm.as_secs_f64()
    ));
    let mut p99_at_1k = None;
    for &r in &s.latency_rates {
        let spec = Spec {
            topics: 1,
            body_len: 12,
            rate: r,
            time: s.latency_time,
            warm: s.latency_warm,
            concurrency: 64,
        };
        for imp in s.sides.clone() {
            let m = measure(target, imp, &spec).await?;
            let goal = if r == 1_000 && imp == Imp::Ezmq {
                p99_at_1k = Some(m.latency.p99);
                verdict(m.latency.p99 < GOAL_P99 && m.received == m.sent)
            } else {
                String::new()
            };
            single.row(row(r, imp, &m, goal));
        }
    }
    let mut mixed = table("Mixed read/write, 20 topics, 1 KiB bodies (ms)", "received");
    mixed.note(
        "Every message is written once and read once (1:1), spread round-robin over 20 \
         topics; 20 listeners (ezmq, concurrency 16 each) or 20 GETJOB loops (raw, COUNT 16), \
         all in one process, while the producer keeps pushing.",
    );
    let spec = Spec {
        topics: 20,
        body_len: 1024,
        rate: s.mixed_rate,
        time: s.latency_time,
        warm: s.latency_warm,
        concurrency: 16,
    };
    for imp in s.sides.clone() {
        let m = measure(target, imp, &spec).await?;
        let received = format!("{}/{}", m.received, m.sent);
        mixed.row(row(spec.rate, imp, &m, received));
    }
    Ok((vec![single, mixed], p99_at_1k))
}

/// A latency table titled `title`: the columns [`row`] fills, then `last`.
pub(crate) fn table(title: impl Into<String>, last: &str) -> Table {
    Table::new(
        title,
        &[
            "rate msg/s",
            "impl",
            "sent/s",
            "p50",
            "p99",
            "p99.9",
            "max",
            "samples",
            last,
        ],
    )
}

/// A row of a latency table.
pub(crate) fn row(r: u64, imp: Imp, m: &Measured, last: String) -> Vec<String> {
    vec![
        rate(r as f64),
        match imp {
            Imp::Raw => "raw",
            Imp::Ezmq => "ezmq",
        }
        .to_owned(),
        rate(m.send_rate),
        ms(m.latency.p50),
        ms(m.latency.p99),
        ms(m.latency.p999),
        ms(m.latency.max),
        m.latency.count.to_string(),
        last,
    ]
}

/// One run of `spec` with receivers of `imp` and a paced producer.
async fn measure(target: &Target, imp: Imp, spec: &Spec) -> BoxResult<Measured> {
    let queues: Vec<String> = (0..spec.topics).map(|_| unique_queue("latency")).collect();
    let base = Instant::now();
    let rec = Arc::new(Recorder::new(base));
    let mux = target.raw().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut consumers: JoinSet<BoxResult<()>> = JoinSet::new();
    let (sent, send_rate, client) = match imp {
        Imp::Ezmq => {
            let client = target.ezmq().await?;
            for q in &queues {
                let rec = Arc::clone(&rec);
                client
                    .add_consume_listener_with(
                        q,
                        ConsumeOptions::new()
                            .with_concurrency(spec.concurrency)
                            .with_fetch_wait(super::FETCH_WAIT),
                        move |job| {
                            rec.record(job.body());
                            async { Ok::<(), Infallible>(()) }
                        },
                    )
                    .await?;
            }
            let c = client.clone();
            rec.start_now(spec.warm);
            let (sent, send_rate) = produce(spec, base, &queues, move |q, body| {
                let c = c.clone();
                async move {
                    c.push(&q, body).await?;
                    Ok(())
                }
            })
            .await?;
            (sent, send_rate, Some(client))
        }
        Imp::Raw => {
            for q in &queues {
                let (rec, stop, mux, q) =
                    (Arc::clone(&rec), Arc::clone(&stop), mux.clone(), q.clone());
                let mut conn = target.raw().await?;
                let count = spec.concurrency;
                consumers.spawn(async move {
                    let mut acks: JoinSet<BoxResult<()>> = JoinSet::new();
                    while !stop.load(Ordering::Relaxed) {
                        let jobs = raw::getjob(&mut conn, &q, count, 100).await?;
                        for job in &jobs {
                            rec.record(&job.body);
                        }
                        let ids: Vec<String> = jobs.into_iter().map(|j| j.id).collect();
                        let mux = mux.clone();
                        acks.spawn(async move { raw::ack_each(&mux, &ids).await });
                        while let Some(done) = acks.try_join_next() {
                            done??;
                        }
                    }
                    while let Some(done) = acks.join_next().await {
                        done??;
                    }
                    Ok(())
                });
            }
            rec.start_now(spec.warm);
            let (sent, send_rate) = produce(spec, base, &queues, move |q, body| {
                let mut conn = mux.clone();
                async move { raw::push(&mut conn, &q, &body).await }
            })
            .await?;
            (sent, send_rate, None)
        }
    };
    rec.wait_for(sent, TAIL_WAIT).await;
    stop.store(true, Ordering::Relaxed);
    while let Some(done) = consumers.join_next().await {
        done??;
    }
    if let Some(client) = client {
        client.shutdown(Duration::from_secs(1)).await?;
    }
    Ok(rec.measured(sent, send_rate))
}

/// Sends `spec.rate` messages per second for `spec.time`, round-robin over
/// `queues`, each send its own task. Returns the count sent and the send
/// rate achieved.
pub(crate) async fn produce<F, Fut>(
    spec: &Spec,
    base: Instant,
    queues: &[String],
    send: F,
) -> BoxResult<(u64, f64)>
where
    F: Fn(String, Bytes) -> Fut,
    Fut: Future<Output = BoxResult<()>> + Send + 'static,
{
    let total = (spec.rate as f64 * spec.time.as_secs_f64()).round() as u64;
    let start = base.elapsed().as_nanos() as u64;
    let gap = 1e9 / spec.rate as f64;
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut sends: JoinSet<BoxResult<()>> = JoinSet::new();
    let mut i = 0u64;
    while i < total {
        tick.tick().await;
        let now = base.elapsed().as_nanos() as u64;
        let due = ((((now - start) as f64) / gap) as u64 + 1).min(total);
        while i < due {
            // Stamped when the push is issued: the pacing timer's own
            // jitter (1 ms ticks) is not charged to the system under test.
            let stamp = base.elapsed().as_nanos() as u64;
            let mut body = vec![0u8; spec.body_len.max(8)];
            body[..8].copy_from_slice(&stamp.to_le_bytes());
            let q = queues[(i as usize) % queues.len()].clone();
            sends.spawn(send(q, Bytes::from(body)));
            i += 1;
        }
        while let Some(done) = sends.try_join_next() {
            done??;
        }
    }
    let elapsed = (base.elapsed().as_nanos() as u64 - start) as f64 / 1e9;
    while let Some(done) = sends.join_next().await {
        done??;
    }
    Ok((total, total as f64 / elapsed.max(1e-9)))
}
