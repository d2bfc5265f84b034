//! `DisqueDelivery`: how one delivered Disque job settles itself.

use std::any::Any;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::job_meta::RESERVATION_HEADER;
use ezmq_core::spi::{envelope, Settle};
use ezmq_core::{Headers, JobId, PushOptions, Result, Topic, ATTEMPT_HEADER};

use crate::backend::DisqueBackend;

/// Retries shorter than this wait in the listener and then `NACK` (Disque
/// counts delays in whole seconds); longer ones re-add the job with `DELAY`.
const SHORTEST_BROKER_DELAY: Duration = Duration::from_secs(1);

/// The settle handle of one delivered job.
#[derive(Debug)]
pub(crate) struct DisqueDelivery {
    pub(crate) backend: DisqueBackend,
    /// The Disque job id (not the message id the handler sees).
    pub(crate) id: JobId,
    pub(crate) queue: Topic,
    /// The stored body, headers still enveloped: a retry re-adds it.
    pub(crate) headers: Headers,
    pub(crate) body: Bytes,
    pub(crate) attempt: u32,
}

#[async_trait]
impl Settle for DisqueDelivery {
    /// `ACKJOB`.
    async fn ack(&self) -> Result<()> {
        self.backend.ack(&self.id).await
    }

    /// Short delays: wait, then `NACK` (Disque counts the attempt). From
    /// one second on: `ADDJOB ... DELAY <secs>` of a copy carrying the
    /// next attempt number in its headers, then `ACKJOB` of this one (a
    /// failure in between leaves both: at worst a duplicate, never a loss).
    async fn retry(&self, delay: Duration) -> Result<()> {
        if delay < SHORTEST_BROKER_DELAY {
            tokio::time::sleep(delay).await;
            return self.backend.nack(&self.id).await;
        }
        let mut headers = self.headers.clone();
        headers.insert(ATTEMPT_HEADER, (self.attempt.saturating_add(1)).to_string());
        let stored = envelope::encode(&headers, &self.body);
        self.backend
            .add(&self.queue, stored, &PushOptions::new().with_delay(delay))
            .await?;
        self.backend.ack(&self.id).await
    }

    /// `ADDJOB ... DELAY <secs>` of a copy with the same attempt number
    /// and the reservation header, then `ACKJOB` of this one, as a long
    /// retry does. Disque counts delays in whole seconds, rounded up: a
    /// deferred job comes back up to a second after its reserved start.
    async fn defer(&self, delay: Duration, reservation: Option<&str>) -> Result<()> {
        let mut headers = self.headers.clone();
        headers.insert(ATTEMPT_HEADER, self.attempt.to_string());
        match reservation {
            Some(mark) => {
                headers.insert(RESERVATION_HEADER, mark.to_owned());
            }
            None => {
                headers.remove(RESERVATION_HEADER);
            }
        }
        let stored = envelope::encode(&headers, &self.body);
        self.backend
            .add(
                &self.queue,
                stored,
                &PushOptions::new().with_delay(delay.max(SHORTEST_BROKER_DELAY)),
            )
            .await?;
        self.backend.ack(&self.id).await
    }

    /// `ENQUEUE`: back in the queue at once. Disque still counts the next
    /// delivery as an additional one, so the attempt number grows.
    async fn release(&self) -> Result<()> {
        self.backend.requeue(&self.id).await
    }

    /// `WORKING`: returns the job's retry time.
    async fn extend_lease(&self) -> Result<Duration> {
        self.backend.working(&self.id).await
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
