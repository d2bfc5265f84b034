//! The fetch loop of a listener.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::backend::Backend;
use crate::job::Job;

use super::acker::{self, AckQueue};
use super::backoff::FetchBackoff;
use super::{execution, Ctx};

/// Runs the listener: starts its acker and heartbeat ticker, fetches until
/// stopped, then waits for its jobs to be ACKed or given back.
pub(crate) async fn run<B: Backend>(ctx: Arc<Ctx<B>>, ack_queue: AckQueue) {
    let _done = ctx.control.done_guard();
    // Both helpers end only after every job task has: the acker then
    // flushes the last ACKs before the listener reports drained (and so
    // before the client closes the backend).
    let wind_down = CancellationToken::new();
    let acker = tokio::spawn(
        acker::run(Arc::clone(&ctx.backend), ack_queue, wind_down.clone()).in_current_span(),
    );
    let ticker = tokio::spawn(
        Arc::clone(&ctx.heartbeats)
            .run(Arc::clone(&ctx.backend), wind_down.clone())
            .in_current_span(),
    );
    // Also stops them should this task be dropped half-way.
    let wind_down_guard = wind_down.drop_guard();
    fetch_until_stopped(&ctx).await;
    ctx.jobs.close();
    ctx.jobs.wait().await;
    drop(wind_down_guard);
    for (task, result) in [("acker", acker.await), ("heartbeat ticker", ticker.await)] {
        if let Err(err) = result {
            tracing::error!(task, cause = %err, "listener task failed");
        }
    }
    tracing::debug!("listener stopped");
}

async fn fetch_until_stopped<B: Backend>(ctx: &Arc<Ctx<B>>) {
    let mut errors = FetchBackoff::new();
    loop {
        let Some(permits) = free_slots(ctx).await else {
            return;
        };
        // A fetch in flight is awaited, not dropped: it is bounded by
        // `fetch_wait`, and dropping it could strand delivered jobs until
        // their retry window.
        let fetched = ctx
            .backend
            .fetch(&ctx.topic, permits.len(), ctx.options.fetch_wait)
            .await;
        match fetched {
            Ok(jobs) => {
                errors.reset();
                if ctx.control.is_stopping() {
                    give_back(ctx, jobs, "listener stopping").await;
                    return;
                }
                dispatch(ctx, jobs, permits).await;
            }
            Err(err) => {
                drop(permits);
                let delay = errors.next_delay();
                tracing::warn!(cause = %err, retry_in = ?delay, "fetch failed");
                tokio::select! {
                    biased;
                    () = ctx.control.stopping() => return,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// How long the fetch loop waits for more slots to free up once one is free
/// but fewer than half are (see [`free_slots`]).
const LINGER: Duration = Duration::from_millis(1);

/// Waits for at least one free slot, then takes every other free one, up to
/// the concurrency. `None` once the listener is stopping.
///
/// On a busy listener slots come back a few at a time (as ACK batches are
/// answered); fetching at once for every one of them means many small
/// `GETJOB`s. So when fewer than half the slots are free, it waits up to
/// [`LINGER`] for that half before fetching. An idle listener has all its
/// slots free and fetches at once: the wait costs latency only when the
/// listener is saturated, where jobs wait in the queue anyway.
async fn free_slots<B: Backend>(ctx: &Ctx<B>) -> Option<Vec<OwnedSemaphorePermit>> {
    let first = tokio::select! {
        biased;
        () = ctx.control.stopping() => return None,
        permit = Arc::clone(&ctx.slots).acquire_owned() => permit.ok()?,
    };
    let concurrency = ctx.options.concurrency;
    let mut permits = Vec::with_capacity(concurrency);
    permits.push(first);
    take_free(ctx, &mut permits);
    let half = concurrency.div_ceil(2);
    if permits.len() < half {
        let linger = tokio::time::sleep(LINGER);
        tokio::pin!(linger);
        while permits.len() < half {
            tokio::select! {
                biased;
                () = ctx.control.stopping() => return None,
                permit = Arc::clone(&ctx.slots).acquire_owned() => permits.push(permit.ok()?),
                () = &mut linger => break,
            }
            take_free(ctx, &mut permits);
        }
    }
    Some(permits)
}

/// Takes every slot free right now, up to the concurrency.
fn take_free<B: Backend>(ctx: &Ctx<B>, permits: &mut Vec<OwnedSemaphorePermit>) {
    while permits.len() < ctx.options.concurrency {
        match Arc::clone(&ctx.slots).try_acquire_owned() {
            Ok(permit) => permits.push(permit),
            Err(_) => break,
        }
    }
}

/// Starts a task per job, each with its slot.
async fn dispatch<B: Backend>(
    ctx: &Arc<Ctx<B>>,
    jobs: Vec<Job>,
    permits: Vec<OwnedSemaphorePermit>,
) {
    let mut permits = permits.into_iter();
    let mut excess = Vec::new();
    for job in jobs {
        let Some(permit) = permits.next() else {
            excess.push(job);
            continue;
        };
        let span = tracing::info_span!(
            "job",
            topic = %ctx.topic,
            job_id = %job.id(),
            attempt = job.attempt(),
        );
        ctx.jobs
            .spawn(execution::run_job(Arc::clone(ctx), job, permit).instrument(span));
    }
    if !excess.is_empty() {
        give_back(ctx, excess, "backend returned more jobs than asked").await;
    }
}

/// Puts jobs that were fetched but will not run back in the queue.
async fn give_back<B: Backend>(ctx: &Ctx<B>, jobs: Vec<Job>, reason: &'static str) {
    for job in jobs {
        match ctx.backend.requeue(job.id()).await {
            Ok(()) => tracing::debug!(job_id = %job.id(), reason, "job given back without running"),
            Err(err) => tracing::warn!(
                job_id = %job.id(),
                cause = %err,
                reason,
                "could not give a job back; it is redelivered after its retry window"
            ),
        }
    }
}
