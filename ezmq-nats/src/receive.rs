//! Receiving: a pull from the source's durable consumer — what is there
//! at once, or else a wait for the first job and what came with it.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::Message;
use ezmq_core::spi::{envelope, Delivery, Source};
use ezmq_core::{Job, JobId, Result, MESSAGE_ID_HEADER};
use futures::StreamExt;

use crate::backend::Inner;
use crate::push::{now_ms, EXPIRES_HEADER};
use crate::settle::NatsDelivery;

/// The longest one pull request waits at the server. A request left by a
/// receive that was dropped (a listener stopping) can still take a job
/// until it expires; that job then comes back after the lease. Kept
/// short so that window is short.
const MAX_PULL_WAIT: Duration = Duration::from_secs(1);

/// The longest a pull that takes only what is there waits for the
/// server's answer (it comes at once, with the jobs or with "none").
const NO_WAIT_LIMIT: Duration = Duration::from_millis(200);

/// How long after a waiting pull's expiry its end may still come.
const EXPIRY_MARGIN: Duration = Duration::from_millis(500);

/// [`Backend::receive`](ezmq_core::spi::Backend::receive).
pub(crate) async fn receive(
    inner: &Arc<Inner>,
    source: &Source,
    max: usize,
    wait: Duration,
) -> Result<Vec<Delivery>> {
    let consumer = inner.consumer(source).await?;
    let max = max.max(1);
    let mut got = pull(inner, source, &consumer, max, None).await?;
    if got.is_empty() && wait >= Duration::from_millis(1) {
        got = pull(inner, source, &consumer, 1, Some(wait.min(MAX_PULL_WAIT))).await?;
        if !got.is_empty() && max > 1 {
            got.extend(pull(inner, source, &consumer, max - 1, None).await?);
        }
    }
    let mut out = Vec::with_capacity(got.len());
    for message in got {
        if let Some(delivery) = delivery(inner, source, message).await? {
            out.push(delivery);
        }
    }
    Ok(out)
}

/// One pull of up to `n` messages: those there now (`expires` `None`),
/// or those that come within `expires`.
async fn pull(
    inner: &Inner,
    source: &Source,
    consumer: &PullConsumer,
    n: usize,
    expires: Option<Duration>,
) -> Result<Vec<Message>> {
    inner.ensure_open()?;
    // A request lost with its connection gets no answer from the server,
    // nor does one that reaches a consumer whose cluster has not elected
    // its leader yet: past its expiry (and a margin for the answer),
    // nothing came.
    let limit = expires.unwrap_or(NO_WAIT_LIMIT) + EXPIRY_MARGIN;
    let pulled = tokio::time::timeout(limit, async {
        let mut batch = match expires {
            None => consumer.fetch().max_messages(n).messages().await,
            Some(expires) => {
                consumer
                    .batch()
                    .max_messages(n)
                    .expires(expires)
                    .messages()
                    .await
            }
        }?;
        let mut got = Vec::with_capacity(n);
        while let Some(message) = batch.next().await {
            match message {
                Ok(message) => got.push(message),
                // What came before the error is kept: those jobs are this
                // consumer's until their lease ends.
                Err(err) if got.is_empty() => return Err(err),
                Err(err) => {
                    tracing::debug!(error = %err, "a pull ended early");
                    break;
                }
            }
        }
        Ok::<_, async_nats::Error>(got)
    })
    .await;
    match pulled {
        Ok(Ok(got)) => Ok(got),
        Ok(Err(err)) => {
            // The consumer may be gone (a group dropped for inactivity):
            // the next receive looks it up again.
            inner.forget_consumer(&consumer.cached_info().name);
            tracing::debug!(source = %source, error = %err, "pull failed");
            Err(crate::error::NatsBackendError::Request {
                request: "fetch",
                source: err,
                retryable: true,
            }
            .into())
        }
        Err(_) => {
            tracing::debug!(source = %source, after = ?limit, "a pull got no answer; nothing taken");
            Ok(Vec::new())
        }
    }
}

/// The delivery of `message`, or `None` for a job past its ttl (acked
/// and dropped).
async fn delivery(
    inner: &Arc<Inner>,
    source: &Source,
    message: Message,
) -> Result<Option<Delivery>> {
    let (delivered, sequence) = match message.info() {
        Ok(info) => (info.delivered, info.stream_sequence),
        Err(err) => {
            tracing::warn!(source = %source, error = %err, "a message without JetStream metadata; skipped");
            return Ok(None);
        }
    };
    let (message, acker) = message.split();
    let nats_headers = message.headers.unwrap_or_default();
    let expires = nats_headers
        .get(EXPIRES_HEADER)
        .and_then(|v| v.as_str().parse::<u64>().ok());
    let (headers, body) = envelope::decode(message.payload);
    let id = headers
        .get(MESSAGE_ID_HEADER)
        .map_or_else(|| JobId::new(format!("nats-{sequence}")), JobId::new);
    if expires.is_some_and(|at| now_ms() >= at) {
        tracing::debug!(topic = %source.topic(), message_id = %id, "job expired before delivery; dropped");
        acker.ack().await.map_err(crate::error::boxed("ack"))?;
        return Ok(None);
    }
    let base = headers.attempt().unwrap_or(1).max(1);
    let redeliveries = u32::try_from(delivered.saturating_sub(1)).unwrap_or(u32::MAX);
    let attempt = base.saturating_add(redeliveries);
    let job = Job::new(id.clone(), source.topic().clone(), body.clone())
        .with_headers(headers.clone())
        .with_attempt(attempt);
    let handle = NatsDelivery {
        inner: Arc::clone(inner),
        acker,
        source: source.clone(),
        id,
        headers,
        nats_headers,
        body,
        attempt,
    };
    Ok(Some(Delivery::new(job, handle)))
}
