//! The fetch loop of a listener.

use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

use crate::backend::Backend;
use crate::job::Job;

use super::backoff::FetchBackoff;
use super::{execution, Ctx};

/// Runs the listener: fetches until stopped, then waits for its jobs to be
/// ACKed or given back.
pub(crate) async fn run<B: Backend>(ctx: Arc<Ctx<B>>) {
    let _done = ctx.control.done_guard();
    fetch_until_stopped(&ctx).await;
    ctx.jobs.close();
    ctx.jobs.wait().await;
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

/// Waits for at least one free slot, then takes every other free one, up to
/// the concurrency. `None` once the listener is stopping.
async fn free_slots<B: Backend>(ctx: &Ctx<B>) -> Option<Vec<OwnedSemaphorePermit>> {
    let first = tokio::select! {
        biased;
        () = ctx.control.stopping() => return None,
        permit = Arc::clone(&ctx.slots).acquire_owned() => permit.ok()?,
    };
    let mut permits = Vec::with_capacity(ctx.options.concurrency);
    permits.push(first);
    while permits.len() < ctx.options.concurrency {
        match Arc::clone(&ctx.slots).try_acquire_owned() {
            Ok(permit) => permits.push(permit),
            Err(_) => break,
        }
    }
    Some(permits)
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
