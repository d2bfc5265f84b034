//! The fetch loop of a listener.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures::future::Either;
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::spi::Delivery;
use crate::telemetry;
use crate::topic::Topic;

use super::acker::{self, AckQueue};
use super::backoff::FetchBackoff;
use super::key_gate::{KeyGate, Sorted};
use super::lanes::{self, LaneFetch};
use super::rate_gate::RateGate;
use super::slot_gate::{GlobalSlot, SlotPool};
use super::{admission, depth, execution, topic_pause, Ctx};

/// Runs the listener: starts its acker and heartbeat ticker, fetches until
/// stopped, then waits for its jobs to be ACKed or given back.
pub(crate) async fn run(ctx: Arc<Ctx>, ack_queue: AckQueue) {
    let _done = ctx.control.done_guard();
    // Both helpers end only after every job task has: the acker then
    // flushes the last ACKs before the listener reports drained (and so
    // before the client closes the backend).
    let wind_down = CancellationToken::new();
    let acker = tokio::spawn(
        acker::run(Arc::clone(&ctx.backend), ack_queue, wind_down.clone()).in_current_span(),
    );
    let ticker = ctx.heartbeats.as_ref().map(|heartbeats| {
        tokio::spawn(
            Arc::clone(heartbeats)
                .run(wind_down.clone())
                .in_current_span(),
        )
    });
    let sampler = ctx.options.queue_depth_every.map(|every| {
        tokio::spawn(depth::run(Arc::clone(&ctx), every, wind_down.clone()).in_current_span())
    });
    let pool = SlotPool::new(&ctx);
    let renewer = pool.as_ref().map(|pool| {
        tokio::spawn(
            Arc::clone(pool)
                .renew_until(wind_down.clone())
                .in_current_span(),
        )
    });
    // Before the first fetch: a listener started while its topic is paused
    // stays idle.
    let pause_watch = topic_pause::first_look(&ctx).await.then(|| {
        tokio::spawn(topic_pause::watch(Arc::clone(&ctx), wind_down.clone()).in_current_span())
    });
    // Also stops them should this task be dropped half-way.
    let wind_down_guard = wind_down.drop_guard();
    fetch_until_stopped(&ctx, pool.as_ref()).await;
    // No more fetches: what the backend holds prefetched for this source
    // goes back to the broker now, for other consumers.
    if let Err(err) = lanes::pause_receiving(&ctx).await {
        tracing::debug!(cause = %err, "could not give back prefetched jobs on stop; the broker redelivers them when their lease ends");
    }
    ctx.jobs.close();
    ctx.jobs.wait().await;
    drop(wind_down_guard);
    let topic = ctx.source.topic();
    join(topic, "acker", Some(acker)).await;
    join(topic, "lease extender", ticker).await;
    join(topic, "queue depth sampler", sampler).await;
    join(topic, "pause watch", pause_watch).await;
    join(topic, "slot renewer", renewer).await;
    tracing::debug!("listener stopped");
}

/// Waits for one of the listener's helper tasks, logging its failure.
async fn join(topic: &Topic, task: &'static str, handle: Option<JoinHandle<()>>) {
    if let Some(Err(err)) = match handle {
        Some(handle) => Some(handle.await),
        None => None,
    } {
        tracing::error!(topic = %topic, task, cause = %err, "listener task failed");
    }
}

async fn fetch_until_stopped(ctx: &Arc<Ctx>, pool: Option<&Arc<SlotPool>>) {
    let mut errors = FetchBackoff::new(&ctx.options.fetch_error_backoff);
    let mut rate = RateGate::new(ctx);
    let mut keys = KeyGate::new(ctx);
    let mut lane_fetch = LaneFetch::new();
    loop {
        let Some(admission::Admitted {
            permits,
            global,
            wait,
        }) = admission::admit(ctx, pool, rate.as_mut()).await
        else {
            return;
        };
        // A fetch in flight is awaited, not dropped: it is bounded by
        // `fetch_wait`, and dropping it could strand delivered jobs until
        // their lease ends.
        let fetched = match &ctx.lanes {
            Some(lanes) if lanes.is_active() => {
                lane_fetch.receive(ctx, lanes, permits.len(), wait).await
            }
            _ => ctx.backend.receive(&ctx.source, permits.len(), wait).await,
        };
        match fetched {
            Ok(jobs) => {
                errors.reset();
                if ctx.control.is_stopping() {
                    give_back(jobs, "listener stopping").await;
                    return;
                }
                if ctx.control.is_paused() {
                    // Paused while the fetch was in flight: none of them
                    // starts (the admission step then waits for a resume).
                    if let Some(gate) = rate.as_mut() {
                        gate.fetched(permits.len(), jobs.len());
                    }
                    drop(permits);
                    give_back(jobs, "listener paused").await;
                    continue;
                }
                // Jobs deferred by their key's limit use no token of the
                // topic's: it stays for the next fetch.
                let sorted = match keys.as_mut() {
                    Some(gate) => gate.sort(ctx, jobs).await,
                    None => Sorted {
                        start: jobs,
                        waits: Vec::new(),
                    },
                };
                if let Some(gate) = rate.as_mut() {
                    gate.fetched(permits.len(), sorted.start.len());
                    if gate.cover_late(ctx, sorted.start.len()).await.is_none() {
                        give_back(sorted.start, "listener stopping").await;
                        return;
                    }
                }
                dispatch(ctx, sorted, permits, global).await;
            }
            Err(err) => {
                if let Some(gate) = rate.as_mut() {
                    gate.fetched(permits.len(), 0);
                }
                drop(permits);
                let delay = errors.next_delay();
                tracing::warn!(topic = %ctx.source.topic(), cause = %err, retry_in = ?delay, "fetch failed; retrying");
                tokio::select! {
                    biased;
                    () = ctx.control.stopping() => return,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// Runs each job with its slot: its first poll here, in the fetch loop, and
/// only a job that did not finish in it gets a task of its own. Most
/// handlers of a busy listener finish at once, and a task per job (its
/// allocation, scheduling and wake-ups) was the largest part of the
/// listener's own cost. A handler whose first poll holds the loop longer
/// than [`INLINE_LIMIT`] (CPU work before its first await) turns this off
/// for the listener: its jobs then all start in tasks of their own, where
/// they run in parallel on every worker thread.
///
/// A job with a wait (a start its key reserved a few milliseconds ahead)
/// waits for it holding its slot.
async fn dispatch(
    ctx: &Arc<Ctx>,
    sorted: Sorted,
    permits: Vec<OwnedSemaphorePermit>,
    global: Vec<GlobalSlot>,
) {
    let Sorted { start, waits } = sorted;
    let mut permits = permits.into_iter();
    let mut global = global.into_iter();
    let mut waits = waits.into_iter();
    let mut excess = Vec::new();
    // Nothing below waits for an ACK.
    let hold = ctx.acker.hold();
    for delivery in start {
        let wait = waits.next().unwrap_or_default();
        let Some(permit) = permits.next() else {
            excess.push(delivery);
            continue;
        };
        let span = telemetry::process_span(ctx.backend.name(), &ctx.source, &delivery.job);
        // For the log should ezmq itself panic below (the handler's panics
        // are caught in `execution`).
        let (message_id, attempt) = (delivery.job.id().clone(), delivery.job.attempt());
        let run = execution::run_job(Arc::clone(ctx), delivery, permit, global.next());
        let job = if wait.is_zero() {
            Either::Left(run)
        } else {
            Either::Right(async move {
                tokio::time::sleep(wait).await;
                run.await
            })
        }
        .instrument(span);
        if !ctx.inline_first_poll.load(Ordering::Relaxed) {
            ctx.jobs.spawn(job);
            continue;
        }
        let mut job = Box::pin(job);
        let started = Instant::now();
        let polled = std::future::poll_fn(|cx| {
            Poll::Ready(std::panic::catch_unwind(AssertUnwindSafe(|| {
                job.as_mut().poll(cx)
            })))
        })
        .await;
        let first_poll = started.elapsed();
        if first_poll > INLINE_LIMIT {
            ctx.inline_first_poll.store(false, Ordering::Relaxed);
            tracing::debug!(
                ?first_poll,
                "a handler held the fetch loop; this listener's jobs now start in tasks of their own"
            );
        }
        match polled {
            Ok(Poll::Ready(())) => {}
            Ok(Poll::Pending) => {
                ctx.jobs.spawn(job);
            }
            // The handler's own panics are caught in `execution`; this is
            // one of ezmq's, and it costs that job only, as it would in a
            // task (the broker redelivers the job when its lease ends).
            Err(_) => tracing::error!(
                topic = %ctx.source.topic(),
                %message_id,
                attempt,
                "job processing panicked (a bug in ezmq); the job is left to its lease"
            ),
        }
    }
    drop(hold);
    if !excess.is_empty() {
        give_back(excess, "backend returned more jobs than asked").await;
    }
}

/// Longest first poll of a job run in the fetch loop before the listener
/// starts every job in a task of its own.
const INLINE_LIMIT: Duration = Duration::from_micros(200);

/// Puts jobs that were received but will not run back in the queue.
pub(super) async fn give_back(deliveries: Vec<Delivery>, reason: &'static str) {
    let released = deliveries.iter().map(|d| d.handle.release());
    let results = futures::future::join_all(released).await;
    for (delivery, result) in deliveries.iter().zip(results) {
        let job = &delivery.job;
        match result {
            Ok(()) => {
                tracing::debug!(message_id = %job.id(), reason, "job given back without running")
            }
            Err(err) => tracing::warn!(
                topic = %job.topic(),
                message_id = %job.id(),
                attempt = job.attempt(),
                cause = %err,
                reason,
                "could not give a job back; the broker redelivers it when its lease ends"
            ),
        }
    }
}
