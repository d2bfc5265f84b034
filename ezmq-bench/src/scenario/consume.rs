//! Consume throughput on a pre-filled queue: raw `GETJOB COUNT k` +
//! `ACKJOB` loop vs a consume listener with auto-ACK.

use std::time::{Duration, Instant};

use ezmq_disque::{ConsumeOptions, MqClient};

use crate::brokers::{alternating, consume_repeats};
use crate::scenario::drain::{self, DRAIN_LIMIT};
use crate::scenario::{prefill, unique_queue, Imp, Settings};
use crate::stats::{process_cpu, rate, us};
use crate::table::{ratio, verdict, Table};
use crate::target::Target;
use crate::{raw, BoxResult};

/// The consume goal (issue 12): the listener reaches this share of the raw
/// loop.
pub(crate) const GOAL_RATIO: f64 = 0.90;
/// Body of the pre-filled jobs.
const BODY_LEN: usize = 12;

/// Runs the scenario; returns its table and the ezmq/raw ratio.
pub(crate) async fn run(target: &Target, s: &Settings) -> BoxResult<(Table, f64)> {
    let k = s.consume_concurrency;
    let n = s.consume_jobs;
    let mut table = Table::new(
        "Consume throughput on a pre-filled queue (msg/s, best of the repeats)",
        &[
            "jobs",
            "raw GETJOB+ACKJOB loop",
            "ezmq listener",
            "ezmq / raw",
            "ezmq jobs per GETJOB",
            "CPU µs/job raw",
            "CPU µs/job ezmq",
            "goal ≥ 90 %",
        ],
    );
    table.note(format!(
        "Queue pre-filled with {n} jobs of {BODY_LEN} B before each run (not timed). \
         Raw: one loop, `GETJOB TIMEOUT 100 COUNT {k} FROM q` on a dedicated connection, then one \
         `ACKJOB id` per job pipelined on a multiplexed connection and awaited, then the next \
         GETJOB; timed until the last ACK. ezmq: `add_consume_listener_with(q, \
         concurrency {k})`, a handler that only counts, auto-ACK; timed from the listener start \
         until the last handler returned (its ACK is in flight then); its backend is wrapped to count \
         fetches (one extra boxed future per call). {} repeat(s), raw and ezmq alternating, \
         each side first in every other repeat.",
        consume_repeats(s)
    ));
    let (mut best_raw, mut best_ezmq, mut jobs_per_fetch) = (0f64, 0f64, 0f64);
    let mut cpu = [None::<Duration>; 2];
    for repeat in 0..consume_repeats(s) {
        for (_, imp) in alternating(repeat) {
            if !s.runs(imp) {
                continue;
            }
            // Filled right before its run: the other side's queue is not
            // in the server while this one is drained.
            let queue = unique_queue(match imp {
                Imp::Raw => "consume.raw",
                Imp::Ezmq => "consume.ezmq",
            });
            prefill(target, &queue, n, BODY_LEN).await?;
            let cpu0 = process_cpu();
            match imp {
                Imp::Raw => {
                    let per_sec = raw_loop(target, &queue, n, k).await?;
                    if per_sec > best_raw {
                        best_raw = per_sec;
                        cpu[0] = drain::per_job(cpu0, process_cpu(), n);
                    }
                }
                Imp::Ezmq => {
                    let (per_sec, per_fetch) = listener(target, &queue, n, k).await?;
                    if per_sec > best_ezmq {
                        best_ezmq = per_sec;
                        cpu[1] = drain::per_job(cpu0, process_cpu(), n);
                        jobs_per_fetch = per_fetch;
                    }
                }
            }
            raw::drain(&mut target.raw().await?, &queue).await?;
        }
    }
    let r = best_ezmq / best_raw.max(1.0);
    table.row(vec![
        n.to_string(),
        rate(best_raw),
        rate(best_ezmq),
        ratio(best_ezmq, best_raw),
        format!("{jobs_per_fetch:.1} (raw {k})"),
        us(cpu[0]),
        us(cpu[1]),
        if best_raw > 0.0 && best_ezmq > 0.0 {
            verdict(r >= GOAL_RATIO)
        } else {
            String::new()
        },
    ]);
    Ok((table, r))
}

/// The raw loop; returns jobs per second.
async fn raw_loop(target: &Target, queue: &str, n: u64, k: usize) -> BoxResult<f64> {
    let mut get = target.raw().await?;
    let ack = target.raw().await?;
    let start = Instant::now();
    let mut got = 0u64;
    while got < n {
        if start.elapsed() > DRAIN_LIMIT {
            return Err(format!("raw consume: only {got} of {n} jobs in {DRAIN_LIMIT:?}").into());
        }
        let jobs = raw::getjob(&mut get, queue, k, 100).await?;
        let ids: Vec<String> = jobs.into_iter().map(|j| j.id).collect();
        raw::ack_each(&ack, &ids).await?;
        got += ids.len() as u64;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// The ezmq listener; returns jobs per second and the mean jobs per fetch.
async fn listener(target: &Target, queue: &str, n: u64, k: usize) -> BoxResult<(f64, f64)> {
    let (client, counting) = target.ezmq_counting().await?;
    let options = ConsumeOptions::new()
        .with_concurrency(k)
        .with_fetch_wait(super::FETCH_WAIT);
    let elapsed = drain::listener(&client, queue, n, options).await;
    client.shutdown(Duration::from_secs(1)).await?;
    let elapsed = elapsed?;
    let (fetches, fetched) = counting.fetch_counts();
    Ok((
        n as f64 / elapsed.as_secs_f64(),
        fetched as f64 / fetches.max(1) as f64,
    ))
}
