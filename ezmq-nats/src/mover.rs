//! The delay mover: every client pulls from one durable consumer of the
//! delayed stream. A job that is due is published to its topic's subject
//! and then acknowledged; one that is not is handed back with a negative
//! acknowledgement delayed until it is due, so JetStream delivers it
//! again then. A job is never moved early; it is late by the time the
//! server's redelivery timer and one publish take (milliseconds), or,
//! with no client running, until one starts.

use std::sync::Weak;
use std::time::Duration;

use async_nats::header::HeaderMap;
use async_nats::jetstream::consumer::{pull, AckPolicy, PullConsumer};
use async_nats::jetstream::message::{AckKind, PublishMessage};
use async_nats::jetstream::stream::Stream;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::backend::Inner;
use crate::names::Names;
use crate::push::{now_ms, DUE_HEADER, EXPIRES_HEADER};

/// Jobs taken per pull.
const BATCH: usize = 64;
/// How long one pull waits for a job.
const PULL_WAIT: Duration = Duration::from_secs(1);
/// How long a job pulled by a mover that died stays with it (every
/// client's mover shares the consumer, whatever its own lease).
const MOVER_ACK_WAIT: Duration = Duration::from_secs(30);
/// The pause after a failed pull (the server restarting, say).
const BACKOFF: Duration = Duration::from_millis(500);

/// The mover's durable consumer, created when it is missing. No limit on
/// jobs handed back and waiting: a job due in a day must not hold up one
/// due in a second.
pub(crate) async fn consumer(
    delayed: &Stream,
    names: &Names,
) -> Result<PullConsumer, async_nats::Error> {
    crate::durable::consumer(
        delayed,
        &names.mover,
        pull::Config {
            durable_name: Some(names.mover.clone()),
            ack_policy: AckPolicy::Explicit,
            ack_wait: MOVER_ACK_WAIT,
            max_deliver: -1,
            max_ack_pending: -1,
            ..Default::default()
        },
    )
    .await
    .map_err(Into::into)
}

/// The mover's loop, until `cancel`: one pull after another, each job
/// moved (or handed back) as soon as it arrives, the moves of one pull
/// running together.
pub(crate) async fn run(inner: Weak<Inner>, consumer: PullConsumer, cancel: CancellationToken) {
    while !cancel.is_cancelled() {
        let batch = tokio::select! {
            () = cancel.cancelled() => return,
            batch = consumer.batch().max_messages(BATCH).expires(PULL_WAIT).messages() => batch,
        };
        let mut batch = match batch {
            Ok(batch) => batch,
            Err(err) => {
                tracing::debug!(error = %err, "the delay mover's pull failed");
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(BACKOFF) => continue,
                }
            }
        };
        let Some(inner) = inner.upgrade() else { return };
        let mut moving = FuturesUnordered::new();
        // A pull lost with its connection is never answered: past its
        // expiry the next pull is made.
        let expired = tokio::time::sleep(PULL_WAIT + Duration::from_millis(500));
        tokio::pin!(expired);
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                () = &mut expired => break,
                next = batch.next() => match next {
                    Some(Ok(message)) => moving.push(move_one(&inner, message)),
                    Some(Err(err)) => {
                        tracing::debug!(error = %err, "the delay mover's pull ended early");
                        break;
                    }
                    None => break,
                },
                Some(moved) = moving.next(), if !moving.is_empty() => log_failure(moved),
            }
        }
        while let Some(moved) = moving.next().await {
            log_failure(moved);
        }
    }
}

fn log_failure(moved: Result<(), async_nats::Error>) {
    if let Err(err) = moved {
        tracing::debug!(error = %err, "moving a due job failed; it comes back after the lease");
    }
}

/// Moves `message` when it is due, or hands it back until it is.
async fn move_one(
    inner: &Inner,
    message: async_nats::jetstream::Message,
) -> Result<(), async_nats::Error> {
    let headers = message.headers.clone().unwrap_or_default();
    let due = headers
        .get(DUE_HEADER)
        .and_then(|v| v.as_str().parse::<u64>().ok())
        .unwrap_or(0);
    let now = now_ms();
    if due > now {
        let wait = Duration::from_millis(due - now);
        message.ack_with(AckKind::Nak(Some(wait))).await?;
        return Ok(());
    }
    let Some(queue) = inner.names.queue_of_delayed(&message.subject) else {
        tracing::warn!(subject = %message.subject, "a delayed job under a subject of no topic; dropped");
        message.ack().await?;
        return Ok(());
    };
    let info = message.info()?;
    let moved_id = format!(
        "delayed:{}:{}",
        info.stream_sequence,
        info.published.unix_timestamp_nanos()
    );
    let mut out = HeaderMap::new();
    if let Some(expires) = headers.get(EXPIRES_HEADER) {
        out.insert(EXPIRES_HEADER, expires.as_str());
    }
    // A second move of the same job (this client died before its ack) is
    // stored once.
    let publish = PublishMessage::build()
        .payload(message.payload.clone())
        .headers(out)
        .message_id(moved_id);
    let moved = async {
        inner
            .js
            .send_publish(inner.names.job_subject(&queue), publish)
            .await?
            .await?;
        Ok::<(), async_nats::Error>(())
    }
    .await;
    if let Err(err) = moved {
        // Back soon, not after the mover's ack wait (a cluster electing
        // a stream leader, say).
        message.ack_with(AckKind::Nak(Some(BACKOFF))).await?;
        return Err(err);
    }
    message.double_ack().await?;
    Ok(())
}
