//! Running one job: handler with heartbeats and panic capture, then ACK,
//! retry (NACK after backoff) or dead letter.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::OwnedSemaphorePermit;

use crate::backend::Backend;
use crate::handler::Permanent;
use crate::job::{Job, JobId};
use crate::push_options::PushOptions;

use super::dead_letter::DeadLetterRecord;
use super::{backoff, Ctx};

/// How a handler run ended.
#[derive(Debug)]
enum Outcome {
    /// `Ok(())`.
    Done,
    /// An error or a panic.
    Failed { message: String, permanent: bool },
    /// Still running at the end of a stop's grace period.
    Aborted,
}

/// Runs `job` holding `slot`, then settles it with the broker. Runs inside
/// the job's span.
pub(crate) async fn run_job<B: Backend>(ctx: Arc<Ctx<B>>, job: Job, slot: OwnedSemaphorePermit) {
    let attempt = job.attempt();
    let outcome = {
        let _running = ctx.control.track_in_flight();
        run_handler(&ctx, job.clone()).await
    };
    match outcome {
        Outcome::Done => {
            ack(&ctx, job.id(), slot).await;
        }
        Outcome::Aborted => {
            tracing::warn!("handler still running after the shutdown grace period; aborted");
            nack(&ctx, job.id()).await;
        }
        Outcome::Failed { message, permanent } => {
            if permanent || attempt >= ctx.options.max_attempts {
                dead_letter(&ctx, &job, attempt, message, permanent, slot).await;
            } else {
                let delay = backoff::with_jitter(ctx.options.backoff.delay_after(attempt));
                tracing::warn!(cause = %message, retry_in = ?delay, "job failed; will retry");
                retry_later(&ctx, job.id(), delay, slot).await;
            }
        }
    }
}

/// Runs the handler, heartbeating while it runs, until it ends or the stop
/// grace period is over.
async fn run_handler<B: Backend>(ctx: &Ctx<B>, job: Job) -> Outcome {
    let _beating = ctx.heartbeats.register(job.id().clone());
    let handler = Arc::clone(&ctx.handler);
    let handled = AssertUnwindSafe(async move { handler.handle(job).await }).catch_unwind();
    tokio::select! {
        // The handler first: most finish in their first poll, and then the
        // abort signal is never polled (no waiter registered and removed).
        biased;
        result = handled => match result {
            Ok(Ok(())) => Outcome::Done,
            Ok(Err(err)) => Outcome::Failed {
                permanent: Permanent::is_permanent(err.as_ref()),
                message: err.to_string(),
            },
            Err(panic) => Outcome::Failed {
                message: format!("handler panicked: {}", panic_message(panic.as_ref())),
                permanent: false,
            },
        },
        () = ctx.control.abort_signal() => Outcome::Aborted,
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "non-string panic payload"
    }
}

/// Gives the job back after `delay`, without holding a concurrency slot.
/// The job stays active at the broker meanwhile (heartbeats keep it so for
/// long delays); a stop NACKs at once.
async fn retry_later<B: Backend>(
    ctx: &Ctx<B>,
    id: &JobId,
    delay: Duration,
    slot: OwnedSemaphorePermit,
) {
    drop(slot);
    {
        let _beating = ctx.heartbeats.register(id.clone());
        tokio::select! {
            biased;
            () = ctx.control.stopping() => {}
            () = tokio::time::sleep(delay) => {}
        }
    }
    nack(ctx, id).await;
}

/// Pushes a [`DeadLetterRecord`] to the dead-letter topic and ACKs the job
/// (or just logs and ACKs with `DeadLetter::Drop`). When the push fails the
/// job is given back after a backoff instead, so it is never lost.
async fn dead_letter<B: Backend>(
    ctx: &Ctx<B>,
    job: &Job,
    attempt: u32,
    message: String,
    permanent: bool,
    slot: OwnedSemaphorePermit,
) {
    let Some(dead_letter_topic) = &ctx.dead_letter else {
        tracing::error!(cause = %message, permanent, "job failed for good; dropped");
        ack(ctx, job.id(), slot).await;
        return;
    };
    let record = DeadLetterRecord::new(job, attempt, message, permanent);
    let pushed = match serde_json::to_vec(&record) {
        Ok(body) => {
            ctx.backend
                .add(dead_letter_topic, body.into(), &PushOptions::default())
                .await
        }
        Err(err) => Err(err.into()),
    };
    match pushed {
        Ok(dead_id) => {
            tracing::error!(
                cause = %record.error,
                permanent,
                dead_letter_topic = %dead_letter_topic,
                dead_letter_id = %dead_id,
                "job failed for good; moved to the dead-letter topic"
            );
            ack(ctx, job.id(), slot).await;
        }
        Err(err) => {
            let delay = backoff::with_jitter(ctx.options.backoff.delay_after(attempt));
            tracing::error!(
                cause = %err,
                dead_letter_topic = %dead_letter_topic,
                retry_in = ?delay,
                "could not push to the dead-letter topic; giving the job back"
            );
            retry_later(ctx, job.id(), delay, slot).await;
        }
    }
}

/// Hands the job to the listener's acker; `slot` is freed once it is ACKed.
async fn ack<B: Backend>(ctx: &Ctx<B>, id: &JobId, slot: OwnedSemaphorePermit) {
    ctx.acker.ack(&*ctx.backend, id.clone(), slot).await;
}

async fn nack<B: Backend>(ctx: &Ctx<B>, id: &JobId) {
    if let Err(err) = ctx.backend.nack(id).await {
        tracing::warn!(cause = %err, "NACK failed; the job will be redelivered after its retry window");
    }
}
