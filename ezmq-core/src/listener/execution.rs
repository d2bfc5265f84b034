//! Running one job: handler with lease extensions and panic capture, then
//! ACK, retry after a backoff, or dead letter.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::OwnedSemaphorePermit;

use crate::handler::Permanent;
use crate::hooks::FailedAttempt;
use crate::job::Job;
use crate::push_options::PushOptions;
use crate::spi::{error_chain, panic_message, Delivery, DeliveryHandle};

use super::dead_letter::DeadLetterRecord;
use super::decision::{Decision, Outcome, Policy};
use super::slot_gate::GlobalSlot;
use super::{backoff, Ctx};

/// Runs the delivered job holding `slot` (and its global concurrency slot
/// while the handler runs), then settles it with the broker. Runs inside
/// the job's `process` span.
pub(crate) async fn run_job(
    ctx: Arc<Ctx>,
    delivery: Delivery,
    slot: OwnedSemaphorePermit,
    global: Option<GlobalSlot>,
) {
    let Delivery { job, handle } = delivery;
    if ctx.options.at_most_once {
        // Settled before it runs: never delivered again, whatever happens.
        if let Err(err) = handle.ack().await {
            tracing::warn!(
                topic = %job.topic(),
                message_id = %job.id(),
                attempt = job.attempt(),
                cause = %err,
                "could not take the job at most once; skipped (the broker redelivers it when its lease ends)"
            );
            return;
        }
    }
    let attempt = job.attempt();
    let policy = Policy::of(&job, &ctx.options);
    let processing = ctx.telemetry.start();
    let outcome = {
        let _running = ctx.control.track_in_flight();
        run_handler(&ctx, &job, &handle).await
    };
    drop(global);
    let decision = Decision::of(outcome, attempt, &policy);
    processing.finish(decision.settle());
    match &decision {
        Decision::Taken { failure } => ctx.control.count_outcome(failure.is_none()),
        Decision::Ack => ctx.control.count_outcome(true),
        Decision::DeadLetter { .. } | Decision::Retry { .. } => ctx.control.count_outcome(false),
        Decision::Release => {}
    }
    match decision {
        Decision::Taken { failure } => {
            if let Some(message) = failure {
                tracing::error!(
                    topic = %job.topic(),
                    message_id = %job.id(),
                    attempt,
                    cause = %message,
                    "job failed; not retried (at most once)"
                );
            }
            drop(slot);
        }
        Decision::Ack => ctx.acker.ack(&job, handle, slot).await,
        Decision::Release => {
            tracing::warn!(
                topic = %job.topic(),
                message_id = %job.id(),
                attempt,
                "handler still running after the shutdown grace period; aborted (the job goes back to its queue)"
            );
            release(&job, &handle).await;
        }
        Decision::DeadLetter { message, permanent } => {
            let failed = FailedAttempt {
                job: &job,
                attempt,
                error: &message,
                retry_in: None,
                permanent,
            };
            ctx.options.hooks.dead_lettered(&failed);
            dead_letter(
                &ctx,
                &job,
                &handle,
                attempt,
                message.clone(),
                permanent,
                slot,
            )
            .await;
        }
        Decision::Retry { message } => {
            let delay = backoff::with_jitter(policy.backoff.delay_after(attempt));
            let failed = FailedAttempt {
                job: &job,
                attempt,
                error: &message,
                retry_in: Some(delay),
                permanent: false,
            };
            ctx.options.hooks.retried(&failed);
            tracing::warn!(
                topic = %job.topic(),
                message_id = %job.id(),
                attempt,
                cause = %message,
                retry_in = ?delay,
                "job failed; will retry"
            );
            retry(&job, &handle, delay).await;
        }
    }
}

/// Runs the handler, extending the job's lease while it runs, until it
/// ends or the stop grace period is over.
async fn run_handler(ctx: &Ctx, job: &Job, handle: &DeliveryHandle) -> Outcome {
    // Polled only when the handler did not finish at its first poll (the
    // select below is biased): most jobs never register for heartbeats.
    let beat = async {
        let _beating = ctx
            .heartbeats
            .as_ref()
            .map(|h| h.register(job, handle.clone()));
        std::future::pending::<()>().await;
    };
    let handler = Arc::clone(&ctx.handler);
    let owned = job.clone();
    let limit = ctx.options.handler_timeout;
    let handled = AssertUnwindSafe(async move {
        match limit {
            Some(limit) => match tokio::time::timeout(limit, handler.handle(owned)).await {
                Ok(result) => result,
                Err(_) => Err(format!("handler timed out after {limit:?}").into()),
            },
            None => handler.handle(owned).await,
        }
    })
    .catch_unwind();
    let near_deadline = async {
        match ctx.backend.delivery_deadline() {
            Some(deadline) => {
                let warn_at = deadline.mul_f64(0.8);
                tokio::time::sleep(warn_at).await;
                tracing::warn!(
                    topic = %job.topic(),
                    message_id = %job.id(),
                    attempt = job.attempt(),
                    running_for = ?warn_at,
                    broker_deadline = ?deadline,
                    "handler is close to the broker's delivery deadline; the broker will take the job back and redeliver it"
                );
                std::future::pending::<()>().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        // The handler first: most finish in their first poll, and then the
        // other branches are never polled (no timer registered).
        biased;
        result = handled => match result {
            Ok(Ok(())) => Outcome::Done,
            Ok(Err(err)) => Outcome::Failed {
                permanent: Permanent::is_permanent(err.as_ref()),
                message: error_chain(err.as_ref()),
            },
            Err(panic) => Outcome::Failed {
                message: format!("handler panicked: {}", panic_message(panic.as_ref())),
                permanent: false,
            },
        },
        () = ctx.control.abort_signal() => Outcome::Aborted,
        () = near_deadline => Outcome::Aborted,
        () = beat => Outcome::Aborted,
    }
}

/// Hands the job back to come again after `delay`. The caller holds the
/// job's slot until the broker has it back, so a listener with a failing
/// downstream holds at most its concurrency in jobs.
async fn retry(job: &Job, handle: &DeliveryHandle, delay: Duration) {
    if let Err(err) = handle.retry(delay).await {
        tracing::warn!(
            topic = %job.topic(),
            message_id = %job.id(),
            attempt = job.attempt(),
            cause = %err,
            "could not schedule the retry; the broker redelivers the job when its lease ends"
        );
    }
}

/// Most attempts at pushing one dead letter before the job is given back
/// to the broker (which redelivers it, so nothing is lost).
const DEAD_LETTER_PUSHES: u32 = 3;

/// Pushes a [`DeadLetterRecord`] to the dead-letter topic and ACKs the job
/// (or just logs and ACKs with `DeadLetter::Drop`). When the push keeps
/// failing the job is retried later instead, so it is never lost.
async fn dead_letter(
    ctx: &Ctx,
    job: &Job,
    handle: &DeliveryHandle,
    attempt: u32,
    message: String,
    permanent: bool,
    slot: OwnedSemaphorePermit,
) {
    let Some(dead_letter_topic) = &ctx.dead_letter else {
        tracing::error!(
            topic = %job.topic(),
            message_id = %job.id(),
            attempt,
            cause = %message,
            permanent,
            "job failed for good; dropped"
        );
        ctx.acker.ack(job, handle.clone(), slot).await;
        return;
    };
    let record = DeadLetterRecord::new(job, attempt, message, permanent);
    let body = match serde_json::to_vec(&record) {
        Ok(body) => bytes::Bytes::from(body),
        Err(err) => {
            tracing::error!(
                topic = %job.topic(),
                message_id = %job.id(),
                attempt,
                cause = %err,
                "could not encode the dead-letter record; dropped"
            );
            ctx.acker.ack(job, handle.clone(), slot).await;
            return;
        }
    };
    let mut last_error = None;
    // The dead letter keeps the job's id: one job, one id, dead or alive.
    let options = PushOptions::default().with_job_id(job.id());
    for push in 1..=DEAD_LETTER_PUSHES {
        let sending = crate::producer::publish(
            &ctx.sends,
            &*ctx.backend,
            dead_letter_topic,
            body.clone(),
            options.clone(),
        );
        match sending.await {
            Ok(dead_id) => {
                // Kept, but a human has to look at it: an ERROR.
                tracing::error!(
                    topic = %job.topic(),
                    message_id = %job.id(),
                    attempt,
                    cause = %record.error,
                    permanent,
                    dead_letter_topic = %dead_letter_topic,
                    dead_letter_id = %dead_id,
                    "job failed for good; moved to the dead-letter topic"
                );
                ctx.acker.ack(job, handle.clone(), slot).await;
                return;
            }
            Err(err) => {
                last_error = Some(err);
                if push < DEAD_LETTER_PUSHES {
                    tokio::time::sleep(ctx.options.backoff.delay_after(push)).await;
                }
            }
        }
    }
    let delay = backoff::with_jitter(ctx.options.backoff.max);
    // Handled (the job comes back): a warning.
    tracing::warn!(
        topic = %job.topic(),
        message_id = %job.id(),
        attempt,
        cause = last_error.map(|e| e.to_string()),
        dead_letter_topic = %dead_letter_topic,
        retry_in = ?delay,
        "could not push to the dead-letter topic; the job goes back to its queue and is dead-lettered again after its next failure"
    );
    retry(job, handle, delay).await;
}

async fn release(job: &Job, handle: &DeliveryHandle) {
    if let Err(err) = handle.release().await {
        tracing::warn!(
            topic = %job.topic(),
            message_id = %job.id(),
            attempt = job.attempt(),
            cause = %err,
            "could not give the job back; the broker redelivers it when its lease ends"
        );
    }
}
