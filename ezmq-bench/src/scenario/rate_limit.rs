//! What a rate limit that does not bite costs: the same listener draining
//! a pre-filled queue, plain and with `with_rate_limit` far above what it
//! can reach, on any backend (one `Client` factory).

use std::time::Duration;

use ezmq_core::{Client, ConsumeOptions, MqClient, PushOptions};

use crate::scenario::{drain, unique_queue, Settings, FETCH_WAIT};
use crate::stats::{process_cpu, rate, us};
use crate::table::{ratio, verdict, Table};
use crate::BoxResult;

/// The goal (issue 29): the limited listener reaches this share of the plain one.
pub(crate) const GOAL_RATIO: f64 = 0.85;
/// The limit: far above any listener here.
const LIMIT_PER_SECOND: u32 = 1_000_000;
/// Jobs pushed per batch while filling (not timed).
const FILL_BATCH: usize = 500;

/// A backend the rows run on.
pub(crate) trait Subject {
    /// Name in the title and the goal (`Redis`).
    fn name(&self) -> &'static str;
    /// A new ezmq client with its defaults.
    async fn client(&self) -> BoxResult<Client>;
    /// Deletes what a run left behind on `queue`.
    async fn cleanup(&self, queue: &str) -> BoxResult<()>;
}

/// Runs the rows; returns the table and the limited/plain ratio.
pub(crate) async fn run<S: Subject>(subject: &S, s: &Settings) -> BoxResult<(Table, f64)> {
    let name = subject.name();
    let (n, k) = (s.broker_consume_jobs, s.consume_concurrency);
    let mut table = Table::new(
        format!(
            "{name}: consume with a rate limit that does not bite (msg/s, best of the repeats)"
        ),
        &[
            "jobs",
            "plain listener",
            "with_rate_limit(1M/s)",
            "limited / plain",
            "CPU µs/job plain",
            "CPU µs/job limited",
            "goal ≥ 85 %",
        ],
    );
    table.note(format!(
        "Queue filled with {n} jobs through `push_batch` before each run (not timed). Both \
         sides: `add_consume_listener_with(q, concurrency {k})`, a handler that only counts; \
         the limited side adds `with_rate_limit({LIMIT_PER_SECOND}, 1 s)` (the backend's own \
         limiter where it has one, Redis, else core's on its claims). {} repeat(s), \
         alternating, each side first in every other repeat; a new client per run.",
        s.repeats + 1
    ));
    let mut best = [(0f64, None::<Duration>); 2];
    for repeat in 0..=s.repeats {
        let order = if repeat % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let client = subject.client().await?;
            let queue = unique_queue("rate");
            fill(&client, &queue, n).await?;
            let mut options = ConsumeOptions::new()
                .with_concurrency(k)
                .with_fetch_wait(FETCH_WAIT);
            if side == 1 {
                options = options.with_rate_limit(LIMIT_PER_SECOND, Duration::from_secs(1));
            }
            let cpu0 = process_cpu();
            let elapsed = drain::listener(&client, &queue, n, options).await;
            let cpu = drain::per_job(cpu0, process_cpu(), n);
            client.shutdown(Duration::from_secs(1)).await?;
            subject.cleanup(&queue).await?;
            let per_sec = n as f64 / elapsed?.as_secs_f64();
            if per_sec > best[side].0 {
                best[side] = (per_sec, cpu);
            }
        }
    }
    let (plain, limited) = (best[0].0, best[1].0);
    let r = limited / plain.max(1.0);
    table.row(vec![
        n.to_string(),
        rate(plain),
        rate(limited),
        ratio(limited, plain),
        us(best[0].1),
        us(best[1].1),
        verdict(r >= GOAL_RATIO),
    ]);
    Ok((table, r))
}

/// Pushes `n` small jobs to `queue` in batches.
async fn fill(client: &Client, queue: &str, n: u64) -> BoxResult<()> {
    let mut left = n;
    while left > 0 {
        let size = usize::try_from(left).unwrap_or(FILL_BATCH).min(FILL_BATCH);
        let jobs = (0..size)
            .map(|_| (b"rate-limited".as_slice().into(), PushOptions::new()))
            .collect();
        for pushed in client.push_batch(queue, jobs).await? {
            pushed?;
        }
        left -= size as u64;
    }
    Ok(())
}
