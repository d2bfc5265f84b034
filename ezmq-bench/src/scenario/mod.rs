//! The scenarios and what they share: sizes, queue names, prefilling.

pub(crate) mod batch;
pub(crate) mod consume;
pub(crate) mod drain;
pub(crate) mod latency;
pub(crate) mod push;
pub(crate) mod rate_limit;
pub(crate) mod rpc;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::target::Target;
use crate::{raw, BoxResult};

/// Which side of a comparison runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Imp {
    /// Raw Disque commands through the `redis` crate.
    Raw,
    /// The ezmq client.
    Ezmq,
}

/// Sizes and durations of a run (`--smoke` or full).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The sides that run (`--only` narrows it, for profiling).
    pub(crate) sides: Vec<Imp>,
    /// Diagnostic: the ezmq push cells call `DisqueBackend::add` directly,
    /// skipping `MqClient::push` (`--push-via-backend`).
    pub(crate) push_via_backend: bool,
    /// Repeats of the throughput cells (best is reported).
    pub(crate) repeats: usize,
    /// Concurrent push tasks per cell.
    pub(crate) push_tasks: Vec<usize>,
    /// Body sizes of the push cells.
    pub(crate) body_sizes: Vec<usize>,
    /// Untimed start of a push cell.
    pub(crate) push_warm: Duration,
    /// Measured part of a push cell.
    pub(crate) push_measure: Duration,
    /// Jobs in the pre-filled queue of the consume scenario.
    pub(crate) consume_jobs: u64,
    /// Messages in the pre-filled queue of the Redis and RabbitMQ consume
    /// rows.
    pub(crate) broker_consume_jobs: u64,
    /// Listener concurrency and raw `GETJOB COUNT` of the consume scenario.
    pub(crate) consume_concurrency: usize,
    /// Offered rates of the single-topic latency runs (msg/s).
    pub(crate) latency_rates: Vec<u64>,
    /// Length of a latency run.
    pub(crate) latency_time: Duration,
    /// Samples sent during this first part of a latency run are dropped.
    pub(crate) latency_warm: Duration,
    /// Offered rate of the mixed 20-topic run (msg/s, all topics).
    pub(crate) mixed_rate: u64,
    /// Jobs in the deep queue of the PostgreSQL deep-fetch rows.
    pub(crate) deep_fetch_jobs: u64,
    /// Concurrent callers of the request-reply runs.
    pub(crate) rpc_callers: Vec<usize>,
    /// Length of a request-reply run.
    pub(crate) rpc_time: Duration,
}

impl Settings {
    /// A few seconds in all, for CI.
    pub(crate) fn smoke() -> Self {
        Settings {
            sides: vec![Imp::Raw, Imp::Ezmq],
            push_via_backend: false,
            repeats: 1,
            push_tasks: vec![1, 16, 128],
            body_sizes: vec![12, 1024],
            push_warm: Duration::from_millis(20),
            push_measure: Duration::from_millis(100),
            consume_jobs: 500,
            broker_consume_jobs: 500,
            deep_fetch_jobs: 20_000,
            consume_concurrency: 64,
            latency_rates: vec![1_000, 10_000],
            latency_time: Duration::from_millis(400),
            latency_warm: Duration::from_millis(50),
            mixed_rate: 1_000,
            rpc_callers: vec![1, 16],
            rpc_time: Duration::from_millis(200),
        }
    }

    /// The published run (under two minutes on two cores).
    pub(crate) fn full() -> Self {
        Settings {
            sides: vec![Imp::Raw, Imp::Ezmq],
            push_via_backend: false,
            repeats: 2,
            push_tasks: vec![1, 16, 128],
            body_sizes: vec![12, 1024],
            push_warm: Duration::from_millis(250),
            push_measure: Duration::from_millis(1_000),
            consume_jobs: 50_000,
            broker_consume_jobs: 20_000,
            deep_fetch_jobs: 1_000_000,
            consume_concurrency: 64,
            latency_rates: vec![1_000, 10_000],
            latency_time: Duration::from_secs(4),
            latency_warm: Duration::from_millis(500),
            mixed_rate: 4_000,
            rpc_callers: vec![1, 16],
            rpc_time: Duration::from_millis(1_500),
        }
    }
}

impl Settings {
    /// Whether `imp` runs in this run.
    pub(crate) fn runs(&self, imp: Imp) -> bool {
        self.sides.contains(&imp)
    }
}

/// A queue name no other run uses.
pub(crate) fn unique_queue(what: &str) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    format!("bench.{what}.{}.{n}", std::process::id())
}

/// Fills `queue` with `n` jobs of `body_len` bytes (raw, 64 pipelining
/// tasks); not timed.
pub(crate) async fn prefill(
    target: &Target,
    queue: &str,
    n: u64,
    body_len: usize,
) -> BoxResult<()> {
    let conn = target.raw().await?;
    let left = Arc::new(AtomicU64::new(n));
    let body: Arc<[u8]> = vec![b'p'; body_len].into();
    let mut set: JoinSet<BoxResult<()>> = JoinSet::new();
    for _ in 0..64 {
        let (mut conn, left, body, queue) = (
            conn.clone(),
            Arc::clone(&left),
            Arc::clone(&body),
            queue.to_owned(),
        );
        set.spawn(async move {
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1))
                .is_ok()
            {
                raw::push(&mut conn, &queue, &body).await?;
            }
            Ok(())
        });
    }
    while let Some(result) = set.join_next().await {
        result??;
    }
    Ok(())
}

/// `fetch_wait` of the bench's ezmq listeners, the same as the raw loops'
/// `GETJOB TIMEOUT 100`. It only matters on an empty queue, and bounds how
/// long stopping a listener takes.
pub(crate) const FETCH_WAIT: Duration = Duration::from_millis(100);
