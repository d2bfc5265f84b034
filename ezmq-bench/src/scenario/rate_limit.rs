//! What flow control costs when it does not bite: the same listener
//! draining a pre-filled queue, plain, with `with_rate_limit` far above
//! what it can reach, with `with_rate_limit_by` over 1,000 keys each far
//! above its share, and with the jobs spread over the three priority
//! lanes, on any backend (one `Client` factory).

use std::time::Duration;

use ezmq_core::spi::Capability;
use ezmq_core::{Client, ConsumeOptions, MqClient, Priority, PushOptions, RateKey};

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
/// Keys the per-key side's jobs are spread over.
const KEYS: u64 = 1000;
/// Each key's limit on the per-key side: the most a key may have, far
/// above its share of any listener here.
const KEY_LIMIT_PER_SECOND: u32 = 1_000;

/// One side of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Plain,
    Limited,
    Keyed,
    Lanes,
}

const SIDES: [Side; 4] = [Side::Plain, Side::Limited, Side::Keyed, Side::Lanes];

impl Side {
    /// The listener's options on this side.
    fn options(self, concurrency: usize) -> ConsumeOptions {
        let options = ConsumeOptions::new()
            .with_concurrency(concurrency)
            .with_fetch_wait(FETCH_WAIT);
        match self {
            Side::Plain | Side::Lanes => options,
            Side::Limited => options.with_rate_limit(LIMIT_PER_SECOND, Duration::from_secs(1)),
            Side::Keyed => options.with_rate_limit_by(
                RateKey::header("tenant"),
                KEY_LIMIT_PER_SECOND,
                Duration::from_secs(1),
            ),
        }
    }

    /// Job `i`'s push options on this side.
    fn push(self, i: u64) -> PushOptions {
        match self {
            Side::Plain | Side::Limited => PushOptions::new(),
            Side::Keyed => PushOptions::new().with_header("tenant", (i % KEYS).to_string()),
            Side::Lanes => PushOptions::new().with_priority(Priority::ALL[(i % 3) as usize]),
        }
    }
}

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
            "{name}: consume with flow control that does not bite (msg/s, best of the repeats)"
        ),
        &[
            "jobs",
            "plain listener",
            "with_rate_limit(1M/s)",
            "limited / plain",
            "with_rate_limit_by (1,000 keys)",
            "keyed / plain",
            "3 priority lanes",
            "lanes / plain",
            "CPU µs/job plain / limited / keyed / lanes",
            "goal ≥ 85 % (limited)",
        ],
    );
    table.note(format!(
        "Queue filled with {n} jobs through `push_batch` before each run (not timed). Every \
         side: `add_consume_listener_with(q, concurrency {k})`, a handler that only counts; \
         limited adds `with_rate_limit({LIMIT_PER_SECOND}, 1 s)` (the backend's own \
         limiter where it has one, Redis, else core's on its claims); keyed pushes each job \
         with a `tenant` header of {KEYS} values and adds \
         `with_rate_limit_by(header tenant, {KEY_LIMIT_PER_SECOND}, 1 s)` (a reservation per \
         job); lanes pushes a third of the jobs High, a third Normal, a third Low (the \
         listener reads the lanes). {} repeat(s), rotating which side goes first; a new \
         client per run.",
        s.repeats + 1
    ));
    let mut best = [(0f64, None::<Duration>); 4];
    let mut keyed = true;
    for repeat in 0..=s.repeats {
        for offset in 0..SIDES.len() {
            let index = (offset + repeat) % SIDES.len();
            let side = SIDES[index];
            let client = subject.client().await?;
            if side == Side::Keyed && !client.capabilities().has(Capability::RateLimitByKey) {
                // Its row says so instead (Kafka: no per-key limits yet).
                keyed = false;
                client.shutdown(Duration::from_secs(1)).await?;
                continue;
            }
            let queue = unique_queue("rate");
            fill(&client, &queue, n, side).await?;
            let cpu0 = process_cpu();
            let elapsed = drain::listener(&client, &queue, n, side.options(k)).await;
            let cpu = drain::per_job(cpu0, process_cpu(), n);
            client.shutdown(Duration::from_secs(1)).await?;
            subject.cleanup(&queue).await?;
            if side == Side::Lanes {
                for lane in ["high", "low"] {
                    subject
                        .cleanup(&format!("__ezmq|lane|{lane}|{queue}"))
                        .await?;
                }
            }
            let per_sec = n as f64 / elapsed?.as_secs_f64();
            if per_sec > best[index].0 {
                best[index] = (per_sec, cpu);
            }
        }
    }
    let plain = best[0].0;
    let r = best[1].0 / plain.max(1.0);
    table.row(vec![
        n.to_string(),
        rate(plain),
        rate(best[1].0),
        ratio(best[1].0, plain),
        if keyed {
            rate(best[2].0)
        } else {
            "not supported".to_owned()
        },
        if keyed {
            ratio(best[2].0, plain)
        } else {
            "—".to_owned()
        },
        rate(best[3].0),
        ratio(best[3].0, plain),
        best.iter()
            .map(|(_, cpu)| us(*cpu))
            .collect::<Vec<_>>()
            .join(" / "),
        verdict(r >= GOAL_RATIO),
    ]);
    Ok((table, r))
}

/// Pushes `n` small jobs to `queue` in batches, as `side` pushes them.
async fn fill(client: &Client, queue: &str, n: u64, side: Side) -> BoxResult<()> {
    let mut left = n;
    while left > 0 {
        let size = usize::try_from(left).unwrap_or(FILL_BATCH).min(FILL_BATCH);
        let first = n - left;
        let jobs = (0..size as u64)
            .map(|i| (b"rate-limited".as_slice().into(), side.push(first + i)))
            .collect();
        for pushed in client.push_batch(queue, jobs).await? {
            pushed?;
        }
        left -= size as u64;
    }
    Ok(())
}
