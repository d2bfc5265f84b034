//! Pushes: a JetStream publish per job (its acknowledgement awaited), to
//! the topic's subject, or to the delayed stream when the job has a
//! delay.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_nats::header::HeaderMap;
use async_nats::jetstream::context::{PublishAckFuture, PublishError, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use bytes::Bytes;
use ezmq_core::spi::envelope;
use ezmq_core::{Error, Headers, JobId, PushOptions, Result, Topic};

use crate::backend::Inner;
use crate::error::NatsBackendError;
use crate::names::token;

/// The header of a delayed job: when it is due, in Unix milliseconds.
pub(crate) const DUE_HEADER: &str = "Ezmq-Due";
/// The header of a job with a ttl: when it expires, in Unix milliseconds.
pub(crate) const EXPIRES_HEADER: &str = "Ezmq-Expires";

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `d` in whole milliseconds, rounded up.
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_micros().div_ceil(1000)).unwrap_or(u64::MAX)
}

/// One job as it is published: subject, headers, payload.
pub(crate) struct Outgoing {
    pub(crate) subject: async_nats::Subject,
    pub(crate) headers: HeaderMap,
    pub(crate) payload: Bytes,
}

impl Outgoing {
    /// The message of a job of `queue` with ezmq's `headers`, `body` and
    /// the push's delay, ttl and message id.
    pub(crate) fn job(
        inner: &Inner,
        queue: &str,
        headers: &Headers,
        body: &[u8],
        options: &PushOptions,
    ) -> Outgoing {
        let mut nats = HeaderMap::new();
        let now = now_ms();
        if let Some(ttl) = options.ttl {
            nats.insert(EXPIRES_HEADER, now.saturating_add(ms(ttl)).to_string());
        }
        if let Some(id) = &options.message_id {
            nats.insert(
                async_nats::header::NATS_MESSAGE_ID,
                format!("{}:{id}", token(queue)),
            );
        }
        let subject = match options.delay.filter(|d| !d.is_zero()) {
            Some(delay) => {
                nats.insert(DUE_HEADER, now.saturating_add(ms(delay)).to_string());
                inner.names.delayed_subject(queue)
            }
            None => inner.names.job_subject(queue),
        };
        Outgoing {
            subject: subject.into(),
            headers: nats,
            payload: envelope::encode(headers, body),
        }
    }

    /// Sends it (again, after a publish nobody received); the returned
    /// future is its acknowledgement. A job without NATS headers goes as
    /// a plain `PUB`.
    pub(crate) async fn send(&self, inner: &Inner, topic: &Topic) -> Result<PublishAckFuture> {
        inner.ensure_open()?;
        let mut publish = PublishMessage::build().payload(self.payload.clone());
        if !self.headers.is_empty() {
            publish = publish.headers(self.headers.clone());
        }
        inner
            .js
            .send_publish(self.subject.clone(), publish)
            .await
            .map_err(|err| not_stored(topic, err))
    }
}

/// The error of a publish that was not sent: nothing was stored.
fn not_stored(topic: &Topic, err: PublishError) -> Error {
    match err.kind() {
        PublishErrorKind::MaxPayloadExceeded => Error::backend(
            NatsBackendError::Request {
                request: "push",
                source: Box::new(err),
                retryable: false,
            },
            false,
        ),
        _ => {
            tracing::debug!(topic = %topic, error = %err, "push not sent");
            crate::error::request("push")(err)
        }
    }
}

/// The pause before a publish nobody received is sent again.
const RESEND: Duration = Duration::from_millis(100);

/// Sends `message` and awaits its acknowledgement: whether it was a
/// duplicate. A publish nobody received (no stream leader: a cluster
/// electing one after a node died) was not stored, so it is sent again
/// every 100 ms until the command timeout.
pub(crate) async fn store(inner: &Inner, topic: &Topic, message: Outgoing) -> Result<bool> {
    let deadline = Instant::now() + inner.config.command_timeout;
    loop {
        let ack = message.send(inner, topic).await?;
        match ack.await {
            Ok(ack) => return Ok(ack.duplicate),
            Err(err)
                if err.kind() == PublishErrorKind::StreamNotFound
                    && Instant::now() + RESEND < deadline =>
            {
                tracing::debug!(topic = %topic, error = %err, "no stream leader took the push; sending it again");
                tokio::time::sleep(RESEND).await;
            }
            Err(err) => return Err(ack_error(topic, err)),
        }
    }
}

/// The error of a sent publish's acknowledgement: a timeout or a lost
/// connection leave the outcome unknown; nobody receiving it (no stream
/// leader for a while) may pass.
fn ack_error(topic: &Topic, err: PublishError) -> Error {
    match err.kind() {
        PublishErrorKind::TimedOut | PublishErrorKind::BrokenPipe | PublishErrorKind::Other => {
            Error::outcome_unknown(
                topic.as_str(),
                NatsBackendError::Request {
                    request: "push",
                    source: Box::new(err),
                    retryable: false,
                },
            )
        }
        PublishErrorKind::StreamNotFound => crate::error::request("push")(err),
        _ => crate::error::refused("push")(err),
    }
}

/// [`Backend::publish`](ezmq_core::spi::Backend::publish).
pub(crate) async fn publish(
    inner: &Inner,
    topic: &Topic,
    body: Bytes,
    options: &PushOptions,
) -> Result<JobId> {
    let id = options.stamped_id().unwrap_or_else(JobId::generate);
    let message = Outgoing::job(inner, topic.as_str(), &options.headers, &body, options);
    if store(inner, topic, message).await? {
        tracing::debug!(topic = %topic, message_id = %id, "duplicate push stored nothing");
    }
    Ok(id)
}

/// [`Backend::publish_batch`](ezmq_core::spi::Backend::publish_batch):
/// every publish sent, then every acknowledgement awaited.
pub(crate) async fn publish_batch(
    inner: &Inner,
    topic: &Topic,
    jobs: &[(Bytes, PushOptions)],
) -> Vec<Result<JobId>> {
    let mut sent = Vec::with_capacity(jobs.len());
    for (body, options) in jobs {
        let id = options.stamped_id().unwrap_or_else(JobId::generate);
        let message = Outgoing::job(inner, topic.as_str(), &options.headers, body, options);
        let ack = message.send(inner, topic).await;
        sent.push((id, message, ack));
    }
    let acks = sent.into_iter().map(|(id, message, ack)| async move {
        match ack?.await {
            Ok(_) => {}
            Err(err) if err.kind() == PublishErrorKind::StreamNotFound => {
                store(inner, topic, message).await?;
            }
            Err(err) => return Err(ack_error(topic, err)),
        }
        Ok(id)
    });
    futures::future::join_all(acks).await
}
