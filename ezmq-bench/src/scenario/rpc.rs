//! Request-reply round trip: raw request/reply queues vs
//! `ezmq-request-reply`.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ezmq_disque::{ConsumeOptions, MqClient};
use ezmq_request_reply::{Request, RequestReplyExt};
use tokio::task::JoinSet;

use crate::scenario::{unique_queue, Imp, Settings};
use crate::stats::{ms, rate, Latency};
use crate::table::Table;
use crate::target::Target;
use crate::{raw, BoxResult};

/// Deadline of one request.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Request payload.
const PAYLOAD: &[u8] = b"ping-payload";
/// Untimed requests per caller before measuring.
const WARM_UP: usize = 20;

/// Runs the request-reply runs, one per caller count.
pub(crate) async fn run(target: &Target, s: &Settings) -> BoxResult<Table> {
    let mut table = Table::new(
        "Request-reply round trip, 12 B payload (ms)",
        &["callers", "impl", "req/s", "p50", "p99", "p99.9", "samples"],
    );
    table.note(format!(
        "Callers loop for {} s after {WARM_UP} untimed requests each; the echo worker is a \
         second client in the same process. ezmq: `request(topic, body, 5 s)` and \
         `add_reply_listener_with(topic, concurrency 64)`. Raw: the caller pushes \
         `ADDJOB q <reply-queue|payload> .. RETRY 0 TTL 5` and blocks in `GETJOB` on its own \
         reply queue; the worker loop takes `GETJOB COUNT 64`, pushes each reply and ACKs \
         the request. Raw has no correlation ids, envelope, deadline checks or error \
         replies: it is the floor of the queue round trips.",
        s.rpc_time.as_secs_f64()
    ));
    for &callers in &s.rpc_callers {
        for imp in s.sides.clone() {
            let (lat, per_sec) = match imp {
                Imp::Raw => raw_rpc(target, callers, s.rpc_time).await?,
                Imp::Ezmq => ezmq_rpc(target, callers, s.rpc_time).await?,
            };
            table.row(vec![
                callers.to_string(),
                match imp {
                    Imp::Raw => "raw",
                    Imp::Ezmq => "ezmq",
                }
                .to_owned(),
                rate(per_sec),
                ms(lat.p50),
                ms(lat.p99),
                ms(lat.p999),
                lat.count.to_string(),
            ]);
        }
    }
    Ok(table)
}

/// Collects the round trips of `callers` tasks; returns the latency and
/// the requests per second.
async fn collect(
    mut set: JoinSet<BoxResult<Vec<u64>>>,
    time: Duration,
) -> BoxResult<(Latency, f64)> {
    let mut all = Vec::new();
    while let Some(done) = set.join_next().await {
        all.extend(done??);
    }
    let per_sec = all.len() as f64 / time.as_secs_f64();
    Ok((Latency::from_nanos(all), per_sec))
}

async fn ezmq_rpc(target: &Target, callers: usize, time: Duration) -> BoxResult<(Latency, f64)> {
    let topic = unique_queue("rpc.ezmq");
    let worker = target.ezmq().await?;
    let caller = target.ezmq().await?;
    worker
        .add_reply_listener_with(
            &topic,
            ConsumeOptions::new()
                .with_concurrency(64)
                .with_fetch_wait(super::FETCH_WAIT),
            |req: Request| async move { Ok::<Bytes, Infallible>(req.into_body()) },
        )
        .await?;
    let mut set: JoinSet<BoxResult<Vec<u64>>> = JoinSet::new();
    let go = Arc::new(tokio::sync::Barrier::new(callers));
    for _ in 0..callers {
        let (caller, topic, go) = (caller.clone(), topic.clone(), Arc::clone(&go));
        set.spawn(async move {
            for _ in 0..WARM_UP {
                caller
                    .request(&topic, Bytes::from_static(PAYLOAD), TIMEOUT)
                    .await?;
            }
            go.wait().await;
            let mut samples = Vec::new();
            let end = Instant::now() + time;
            while Instant::now() < end {
                let t = Instant::now();
                caller
                    .request(&topic, Bytes::from_static(PAYLOAD), TIMEOUT)
                    .await?;
                samples.push(t.elapsed().as_nanos() as u64);
            }
            Ok(samples)
        });
    }
    let result = collect(set, time).await;
    caller.shutdown(Duration::from_secs(1)).await?;
    worker.shutdown(Duration::from_secs(1)).await?;
    result
}

async fn raw_rpc(target: &Target, callers: usize, time: Duration) -> BoxResult<(Latency, f64)> {
    let queue = unique_queue("rpc.raw");
    let mux = target.raw().await?;
    let stop = Arc::new(AtomicBool::new(false));
    // The worker: GETJOB, then per request a reply ADDJOB and an ACKJOB.
    let worker = {
        let (mut conn, mux, stop, queue) = (
            target.raw().await?,
            mux.clone(),
            Arc::clone(&stop),
            queue.clone(),
        );
        tokio::spawn(async move {
            let mut replies: JoinSet<BoxResult<()>> = JoinSet::new();
            while !stop.load(Ordering::Relaxed) {
                for job in raw::getjob(&mut conn, &queue, 64, 100).await? {
                    let mut mux = mux.clone();
                    replies.spawn(async move {
                        let split = job
                            .body
                            .iter()
                            .position(|&b| b == b'|')
                            .ok_or("no reply queue")?;
                        let reply_queue = std::str::from_utf8(&job.body[..split])?;
                        raw::addjob_once(reply_queue, &job.body[split + 1..], 5)
                            .query_async::<redis::Value>(&mut mux)
                            .await?;
                        raw::ack_each(&mux, &[job.id]).await
                    });
                }
                while let Some(done) = replies.try_join_next() {
                    done??;
                }
            }
            while let Some(done) = replies.join_next().await {
                done??;
            }
            Ok::<(), crate::BoxError>(())
        })
    };
    let mut set: JoinSet<BoxResult<Vec<u64>>> = JoinSet::new();
    let go = Arc::new(tokio::sync::Barrier::new(callers));
    for _ in 0..callers {
        let (mut get, mux, queue, go) = (
            target.raw().await?,
            mux.clone(),
            queue.clone(),
            Arc::clone(&go),
        );
        set.spawn(async move {
            let reply_queue = unique_queue("rpc.raw.reply");
            let mut body = reply_queue.as_bytes().to_vec();
            body.push(b'|');
            body.extend_from_slice(PAYLOAD);
            let mut acks: JoinSet<BoxResult<()>> = JoinSet::new();
            let mut samples = Vec::new();
            let mut round_trip =
                async |mux: &redis::aio::MultiplexedConnection| -> BoxResult<String> {
                    raw::addjob_once(&queue, &body, 5)
                        .query_async::<redis::Value>(&mut mux.clone())
                        .await?;
                    let reply =
                        raw::getjob(&mut get, &reply_queue, 1, TIMEOUT.as_millis() as u64).await?;
                    let job = reply.into_iter().next().ok_or("raw request timed out")?;
                    Ok(job.id)
                };
            for _ in 0..WARM_UP {
                round_trip(&mux).await?;
            }
            go.wait().await;
            let end = Instant::now() + time;
            while Instant::now() < end {
                let t = Instant::now();
                let id = round_trip(&mux).await?;
                samples.push(t.elapsed().as_nanos() as u64);
                let mux = mux.clone();
                acks.spawn(async move { raw::ack_each(&mux, &[id]).await });
            }
            while let Some(done) = acks.join_next().await {
                done??;
            }
            Ok(samples)
        });
    }
    let result = collect(set, time).await;
    stop.store(true, Ordering::Relaxed);
    worker.await??;
    result
}
