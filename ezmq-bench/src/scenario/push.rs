//! Push throughput (and peak RSS under the 128-task load): raw pipelined
//! `ADDJOB` vs `client.push`, from N concurrent tasks.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ezmq_disque::{MqClient, PushOptions, Topic};
use tokio::task::JoinSet;

use crate::scenario::{unique_queue, Imp, Settings};
use crate::stats::{mib, proc_status_kib, process_cpu, rate, reset_peak_rss, us};
use crate::table::{ratio, verdict, Table};
use crate::target::Target;
use crate::{raw, BoxResult};

/// Tasks of the memory measurement (and of the throughput goal).
const MEMORY_TASKS: usize = 128;
/// The push goal (issue 12): ezmq reaches this share of raw `ADDJOB` at
/// 128 tasks.
pub(crate) const GOAL_RATIO: f64 = 0.95;

/// One measured run.
#[derive(Debug, Clone, Copy, Default)]
struct Cell {
    /// Pushes per second in the measuring window.
    per_sec: f64,
    /// Peak RSS (KiB) during the run, when it could be reset before.
    peak_kib: Option<u64>,
    /// CPU time of the bench process per push in the measuring window.
    cpu_per_msg: Option<Duration>,
}

/// Outcome of the scenario for the goal summary.
#[derive(Debug, Clone, Default)]
pub(crate) struct PushOutcome {
    /// `(body bytes, ezmq/raw)` at 128 tasks.
    pub(crate) ratios_at_128: Vec<(usize, f64)>,
}

/// Runs the push scenario; `only_memory` keeps just the 128-task cells.
pub(crate) async fn run(
    target: &Target,
    s: &Settings,
    only_memory: bool,
) -> BoxResult<(Vec<Table>, PushOutcome)> {
    let mut thr = Table::new(
        "Push throughput (msg/s, best of the repeats)",
        &[
            "body",
            "tasks",
            "raw ADDJOB",
            "ezmq push",
            "ezmq / raw",
            "CPU µs/msg raw",
            "CPU µs/msg ezmq",
            "goal ≥ 95 % at 128",
        ],
    );
    thr.note(format!(
        "Each cell: {} s warm-up, then {} s measured; {} repeat(s) ({} at 128 tasks), raw and \
         ezmq alternating. \
         Raw: one multiplexed `redis` connection shared by the tasks, \
         `ADDJOB q body 5000 REPLICATE 1 RETRY 30 TTL 600`. \
         ezmq: one `DisqueClient` shared by the tasks, `client.push(topic, body)`.",
        s.push_warm.as_secs_f64(),
        s.push_measure.as_secs_f64(),
        s.repeats,
        s.repeats + 1
    ));
    thr.note(
        "CPU µs/msg: user+system CPU of the bench process in the measuring window per push \
         (10 ms resolution), from the best repeat; with an embedded server it includes the \
         server's work.",
    );
    let mut mem = Table::new(
        format!("Peak RSS under the {MEMORY_TASKS}-task push load (MiB)"),
        &["body", "RSS before", "raw peak", "ezmq peak"],
    );
    mem.note(format!(
        "VmHWM of the bench process, reset (`/proc/self/clear_refs` 5) before each run. Mode: {}.",
        target.mode.describe()
    ));
    let mut outcome = PushOutcome::default();
    let tasks: &[usize] = if only_memory {
        &[MEMORY_TASKS]
    } else {
        &s.push_tasks
    };
    for &body_len in &s.body_sizes {
        for &n in tasks {
            let mut best = [Cell::default(); 2];
            let mut cpu = [None::<Duration>; 2];
            let mut peak = [None::<u64>; 2];
            let before = proc_status_kib("VmRSS");
            // The goal cells get one repeat more: they are the noisiest.
            let repeats = if n == MEMORY_TASKS {
                s.repeats + 1
            } else {
                s.repeats
            };
            for _ in 0..repeats {
                for (i, imp) in [Imp::Raw, Imp::Ezmq].into_iter().enumerate() {
                    if !s.runs(imp) {
                        continue;
                    }
                    let cell = push_cell(target, imp, n, body_len, s).await?;
                    if cell.per_sec > best[i].per_sec {
                        best[i].per_sec = cell.per_sec;
                        cpu[i] = cell.cpu_per_msg;
                    }
                    peak[i] = peak[i].max(cell.peak_kib);
                }
            }
            let (raw_rate, ezmq_rate) = (best[0].per_sec, best[1].per_sec);
            let goal = if n == MEMORY_TASKS && raw_rate > 0.0 && ezmq_rate > 0.0 {
                let r = ezmq_rate / raw_rate.max(1.0);
                outcome.ratios_at_128.push((body_len, r));
                verdict(r >= GOAL_RATIO)
            } else {
                String::new()
            };
            thr.row(vec![
                format!("{body_len} B"),
                n.to_string(),
                rate(raw_rate),
                rate(ezmq_rate),
                ratio(ezmq_rate, raw_rate),
                us(cpu[0]),
                us(cpu[1]),
                goal,
            ]);
            if n == MEMORY_TASKS {
                mem.row(vec![
                    format!("{body_len} B"),
                    mib(before),
                    mib(peak[0]),
                    mib(peak[1]),
                ]);
            }
        }
    }
    let tables = if only_memory {
        vec![mem]
    } else {
        vec![thr, mem]
    };
    Ok((tables, outcome))
}

/// Pushes from `tasks` tasks for warm-up + measuring window.
async fn push_cell(
    target: &Target,
    imp: Imp,
    tasks: usize,
    body_len: usize,
    s: &Settings,
) -> BoxResult<Cell> {
    let queue = unique_queue("push");
    let body = Bytes::from(vec![b'x'; body_len]);
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut set: JoinSet<BoxResult<()>> = JoinSet::new();
    let mut drain_conn = target.raw().await?;
    let client = match imp {
        Imp::Raw => None,
        Imp::Ezmq => Some(target.ezmq().await?),
    };
    let conn = match imp {
        Imp::Raw => Some(target.raw().await?),
        Imp::Ezmq => None,
    };
    // One untimed push opens the connections.
    if let Some(client) = &client {
        client.push(&queue, body.clone()).await?;
    }
    if let Some(conn) = &conn {
        raw::push(&mut conn.clone(), &queue, &body).await?;
    }
    let reset = reset_peak_rss();
    let topic = Topic::new(queue.clone())?;
    let via_backend = s.push_via_backend;
    for _ in 0..tasks {
        let (done, stop, body, queue) = (
            Arc::clone(&done),
            Arc::clone(&stop),
            body.clone(),
            queue.clone(),
        );
        let client = client.clone();
        let mut conn = conn.clone();
        let topic = topic.clone();
        set.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Some(client) = &client {
                    if via_backend {
                        client
                            .runtime()
                            .backend()
                            .publish(&topic, body.clone(), &PushOptions::default())
                            .await?;
                    } else {
                        client.push(&queue, body.clone()).await?;
                    }
                } else if let Some(conn) = conn.as_mut() {
                    raw::push(conn, &queue, &body).await?;
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        });
    }
    tokio::time::sleep(s.push_warm).await;
    let (c0, t0, cpu0) = (done.load(Ordering::Relaxed), Instant::now(), process_cpu());
    tokio::time::sleep(s.push_measure).await;
    let (c1, t1, cpu1) = (done.load(Ordering::Relaxed), Instant::now(), process_cpu());
    stop.store(true, Ordering::Relaxed);
    while let Some(result) = set.join_next().await {
        result??;
    }
    let peak_kib = if reset {
        proc_status_kib("VmHWM")
    } else {
        None
    };
    if let Some(client) = client {
        client.shutdown(Duration::from_secs(1)).await?;
    }
    raw::drain(&mut drain_conn, &queue).await?;
    Ok(Cell {
        per_sec: (c1 - c0) as f64 / (t1 - t0).as_secs_f64(),
        peak_kib,
        cpu_per_msg: match (cpu0, cpu1) {
            (Some(a), Some(b)) if c1 > c0 => {
                Some((b - a) / u32::try_from(c1 - c0).unwrap_or(u32::MAX))
            }
            _ => None,
        },
    })
}
