//! A fetch with a million jobs waiting: ezmq's fetch of 64 from a queue
//! of `deep_fetch_jobs` due rows against the same fetch from a queue of
//! 100, in one table of a schema of the bench's own (created by an ezmq
//! client, dropped at the end). Each fetch runs in a transaction that is
//! rolled back, so every one sees the same table; the two queues
//! alternate, and the medians are compared.

use std::time::{Duration, Instant};

use ezmq_core::MqClient;
use sqlx::PgPool;

use crate::scenario::Settings;
use crate::stats::ms;
use crate::table::{verdict, Table};
use crate::BoxResult;

/// The bench's own schema.
const SCHEMA: &str = "ezmq_bench_deep";
/// Jobs in the shallow queue.
const SHALLOW: u64 = 100;
/// Fetches timed per queue.
const ROUNDS: usize = 40;
/// The goal: the deep fetch takes at most this many times the shallow one.
pub(crate) const GOAL: f64 = 2.0;

/// ezmq's fetch of `$2` jobs, on the bench's schema.
fn fetch_statement() -> String {
    format!(
        "WITH picked AS (SELECT seq FROM {SCHEMA}.jobs WHERE queue = $1 AND visible_at <= now() \
         ORDER BY visible_at, seq LIMIT $2 FOR UPDATE SKIP LOCKED) \
         UPDATE {SCHEMA}.jobs j SET visible_at = now() + $3::bigint * interval '1 millisecond', \
         leased = true, deliveries = j.deliveries + 1 FROM picked WHERE j.seq = picked.seq \
         RETURNING j.seq, j.deliveries, j.body"
    )
}

/// Fills `queue` with `n` due jobs of 12-byte bodies in one statement.
async fn fill(pool: &PgPool, queue: &str, n: u64) -> BoxResult<()> {
    sqlx::query(&format!(
        "INSERT INTO {SCHEMA}.jobs (queue, id, body, headers, attempt, visible_at) \
         SELECT $1, gen_random_uuid()::text, '\\x000102030405060708090a0b'::bytea, '{{}}'::jsonb, \
         1, now() - interval '1 minute' FROM generate_series(1, $2::bigint)"
    ))
    .bind(queue)
    .bind(i64::try_from(n)?)
    .execute(pool)
    .await?;
    Ok(())
}

/// One fetch of 64 from `queue`, rolled back: how long the statement took.
async fn timed_fetch(pool: &PgPool, statement: &str, queue: &str) -> BoxResult<Duration> {
    let mut tx = pool.begin().await?;
    let start = Instant::now();
    let rows = sqlx::query(statement)
        .bind(queue)
        .bind(64_i64)
        .bind(30_000_i64)
        .fetch_all(&mut *tx)
        .await?;
    let took = start.elapsed();
    tx.rollback().await?;
    if rows.len() != 64 {
        return Err(format!(
            "the fetch from {queue} returned {} jobs, not 64",
            rows.len()
        )
        .into());
    }
    Ok(took)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Runs the rows on `pool` (at `url`); prints the table and adds the goal.
pub(crate) async fn run(
    url: &str,
    pool: &PgPool,
    s: &Settings,
    goals: &mut Table,
) -> BoxResult<()> {
    let schema =
        ezmq_postgres::connect(ezmq_postgres::PostgresConfig::new(url).with_schema(SCHEMA)).await?;
    schema.shutdown(Duration::from_secs(1)).await?;
    let deep_n = s.deep_fetch_jobs;
    let filled = Instant::now();
    fill(pool, "deep", deep_n).await?;
    fill(pool, "shallow", SHALLOW).await?;
    sqlx::raw_sql(&format!("VACUUM ANALYZE {SCHEMA}.jobs"))
        .execute(pool)
        .await?;
    let filled = filled.elapsed();
    let statement = fetch_statement();
    let (mut deep, mut shallow) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        deep.push(timed_fetch(pool, &statement, "deep").await?);
        shallow.push(timed_fetch(pool, &statement, "shallow").await?);
    }
    sqlx::raw_sql(&format!("DROP SCHEMA {SCHEMA} CASCADE"))
        .execute(pool)
        .await?;
    let (deep, shallow) = (median(deep), median(shallow));
    let ratio = deep.as_secs_f64() / shallow.as_secs_f64().max(f64::EPSILON);
    let mut t = Table::new(
        "PostgreSQL: ezmq's fetch of 64, deep queue vs shallow queue (median)",
        &["jobs waiting", "fetch", "vs 100 waiting"],
    );
    t.row(vec![
        SHALLOW.to_string(),
        format!("{} ms", ms(shallow)),
        "1.0×".to_owned(),
    ]);
    t.row(vec![
        deep_n.to_string(),
        format!("{} ms", ms(deep)),
        format!("{ratio:.1}×"),
    ]);
    t.note(format!(
        "Both queues in one table of schema `{SCHEMA}` (filled and `VACUUM ANALYZE`d in {:.1} s), \
         {ROUNDS} fetches each, alternating, each in a transaction rolled back.",
        filled.as_secs_f64()
    ));
    println!("{}", t.render());
    goals.row(vec![
        format!("PostgreSQL: a fetch with {deep_n} jobs waiting ≤ {GOAL:.0}× one with {SHALLOW}"),
        format!("{ratio:.1}×"),
        verdict(ratio <= GOAL),
    ]);
    Ok(())
}
