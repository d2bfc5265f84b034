//! Settling deliveries: ack, retry (a negative acknowledgement with the
//! backoff as its delay: JetStream counts it as a delivery, so the
//! attempt follows), release and defer (the job published again as the
//! same attempt, then the delivery acknowledged), and lease extension (an
//! in-progress acknowledgement).

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_nats::header::HeaderMap;
use async_nats::jetstream::message::{AckKind, Acker};
use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::job_meta::RESERVATION_HEADER;
use ezmq_core::spi::{envelope, Settle, Source};
use ezmq_core::{Headers, JobId, Result, ATTEMPT_HEADER};

use crate::backend::Inner;
use crate::error;
use crate::push::{ms, now_ms, Outgoing, DUE_HEADER};

/// The handle of one pulled message, with what it takes to publish the
/// job again.
pub(crate) struct NatsDelivery {
    pub(crate) inner: Arc<Inner>,
    pub(crate) acker: Acker,
    pub(crate) source: Source,
    pub(crate) id: JobId,
    pub(crate) headers: Headers,
    pub(crate) nats_headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) attempt: u32,
}

impl fmt::Debug for NatsDelivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsDelivery")
            .field("source", &self.source)
            .field("id", &self.id)
            .field("attempt", &self.attempt)
            .finish()
    }
}

impl NatsDelivery {
    async fn ack_with(&self, request: &'static str, kind: AckKind) -> Result<()> {
        self.inner.ensure_open()?;
        self.acker
            .ack_with(kind)
            .await
            .map_err(|err| error::NatsBackendError::Request {
                request,
                source: err,
                retryable: true,
            })?;
        Ok(())
    }

    /// Publishes the job again as this attempt, due after `delay`, with
    /// `headers`; then acknowledges this delivery. A crash between the two
    /// leaves both copies: the job runs again, never not at all.
    async fn publish_again(
        &self,
        request: &'static str,
        delay: Duration,
        mut headers: Headers,
    ) -> Result<()> {
        headers.insert(ATTEMPT_HEADER, self.attempt.to_string());
        let queue = self.source.topic().as_str();
        let mut nats = HeaderMap::new();
        if let Some(expires) = self.nats_headers.get(crate::push::EXPIRES_HEADER) {
            nats.insert(crate::push::EXPIRES_HEADER, expires.as_str());
        }
        let subject = if delay.is_zero() {
            self.inner.names.job_subject(queue)
        } else {
            nats.insert(DUE_HEADER, now_ms().saturating_add(ms(delay)).to_string());
            self.inner.names.delayed_subject(queue)
        };
        let again = Outgoing {
            subject: subject.into(),
            headers: nats,
            payload: envelope::encode(&headers, &self.body),
        };
        crate::push::store(&self.inner, self.source.topic(), again).await?;
        self.ack_with(request, AckKind::Ack).await
    }
}

#[async_trait]
impl Settle for NatsDelivery {
    async fn ack(&self) -> Result<()> {
        self.ack_with("ack", AckKind::Ack).await
    }

    async fn retry(&self, delay: Duration) -> Result<()> {
        let delay = (!delay.is_zero()).then_some(delay);
        self.ack_with("retry", AckKind::Nak(delay)).await
    }

    /// Back to the queue as the same attempt, now. A broadcast group's
    /// job cannot be published again to its group alone: it is handed
    /// back with a negative acknowledgement (the next delivery then counts
    /// as one more attempt).
    async fn release(&self) -> Result<()> {
        if self.source.group().is_some() {
            return self.ack_with("release", AckKind::Nak(None)).await;
        }
        self.publish_again("release", Duration::ZERO, self.headers.clone())
            .await
    }

    /// Back to waiting until `delay` ends, as the same attempt, with the
    /// reservation header set or removed. A broadcast group's job is
    /// handed back with a delayed negative acknowledgement instead (one
    /// more attempt, the reservation not kept).
    async fn defer(&self, delay: Duration, reservation: Option<&str>) -> Result<()> {
        if self.source.group().is_some() {
            let delay = (!delay.is_zero()).then_some(delay);
            return self.ack_with("defer", AckKind::Nak(delay)).await;
        }
        let mut headers = self.headers.clone();
        match reservation {
            Some(token) => {
                headers.insert(RESERVATION_HEADER, token);
            }
            None => {
                headers.remove(RESERVATION_HEADER);
            }
        }
        self.publish_again("defer", delay, headers).await
    }

    async fn extend_lease(&self) -> Result<Duration> {
        self.ack_with("extend lease", AckKind::Progress).await?;
        Ok(self.inner.config.lease)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
