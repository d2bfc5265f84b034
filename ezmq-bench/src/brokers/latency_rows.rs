//! The latency rows of a broker: push → handler start at fixed offered
//! rates, ezmq's listener against the raw consumer, each run on a fresh
//! queue.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ezmq_core::{ConsumeOptions, MqClient, MqClientExt};

use super::{ezmq_sender, RawBroker, BODY_LEN};
use crate::scenario::latency::{self, Recorder, Spec, TAIL_WAIT};
use crate::scenario::{unique_queue, Imp, Settings, FETCH_WAIT};
use crate::table::{verdict, Table};
use crate::BoxResult;

/// Latency at each offered rate; returns the table and ezmq's p99 at
/// the goal's rate with whether every message arrived.
pub(super) async fn latency_table<B: RawBroker>(
    b: &B,
    s: &Settings,
) -> BoxResult<(Table, Option<(Duration, bool)>)> {
    let goal = b.p99_goal().as_millis();
    let goal_rate = b.latency_goal_rate();
    let goal_col = format!("goal p99 < {goal} ms @{goal_rate}");
    let mut table = latency::table(
        format!(
            "{}: latency push → handler start, one topic, {BODY_LEN} B bodies (ms)",
            b.name()
        ),
        &goal_col,
    );
    table.note(format!(
        "Each run: {} s at the offered rate, the first {} s dropped as warm-up; pushes from a \
         pacing task (1 ms ticks, each push a task), latency measured from the moment the push \
         is issued. ezmq: `client.push`, one listener with concurrency 64, latency taken when \
         the handler starts. Raw: the same pacing with the raw push; {}",
        (s.latency_time + b.latency_join()).as_secs_f64(),
        (s.latency_warm + b.latency_join()).as_secs_f64(),
        b.raw_notes().latency
    ));
    let mut p99_at_goal = None;
    for r in b.latency_rates(s) {
        let spec = Spec {
            topics: 1,
            body_len: BODY_LEN,
            rate: r,
            time: s.latency_time + b.latency_join(),
            warm: s.latency_warm + b.latency_join(),
            concurrency: 64,
        };
        for imp in s.sides.clone() {
            let m = latency_run(b, imp, &spec).await?;
            let cell = if r == goal_rate && imp == Imp::Ezmq && b.has_goals() {
                let complete = m.received == m.sent;
                p99_at_goal = Some((m.latency.p99, complete));
                verdict(m.latency.p99 < b.p99_goal() && complete)
            } else {
                String::new()
            };
            table.row(latency::row(r, imp, &m, cell));
        }
    }
    Ok((table, p99_at_goal))
}

/// One latency run of `imp` on a fresh queue.
async fn latency_run<B: RawBroker>(b: &B, imp: Imp, spec: &Spec) -> BoxResult<latency::Measured> {
    let queue = unique_queue("latency");
    let base = Instant::now();
    let rec = Arc::new(Recorder::new(base));
    let stop = Arc::new(AtomicBool::new(false));
    let (sender, client, receiver) = match imp {
        Imp::Ezmq => {
            let client = b.ezmq().await?;
            let r = Arc::clone(&rec);
            client
                .add_consume_listener_with(
                    &queue,
                    ConsumeOptions::new()
                        .with_concurrency(spec.concurrency)
                        .with_fetch_wait(FETCH_WAIT),
                    move |job| {
                        r.record(job.body());
                        async { Ok::<(), Infallible>(()) }
                    },
                )
                .await?;
            (ezmq_sender(&client, &queue), Some(client), None)
        }
        Imp::Raw => {
            let sender = b.raw_sender(&queue).await?;
            let receiver = b
                .raw_receiver(
                    &queue,
                    spec.concurrency,
                    Arc::clone(&rec),
                    Arc::clone(&stop),
                )
                .await?;
            (sender, None, Some(receiver))
        }
    };
    rec.start_now(spec.warm);
    let queues = [queue.clone()];
    let (sent, send_rate) =
        latency::produce(spec, base, &queues, move |_q, body| sender(body)).await?;
    rec.wait_for(sent, TAIL_WAIT).await;
    stop.store(true, Ordering::Relaxed);
    if let Some(receiver) = receiver {
        receiver.await??;
    }
    if let Some(client) = client {
        client.shutdown(Duration::from_secs(1)).await?;
    }
    b.cleanup(&queue).await?;
    Ok(rec.measured(sent, send_rate))
}
