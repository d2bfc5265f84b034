//! Settling a record: an ack finishes it (its offset is committed once
//! every earlier record of its partition is finished too); a retry runs
//! it again in place after the backoff, as the next attempt; a release
//! puts it back at the front of the buffer. Nothing is produced, so a
//! settle never waits for the broker.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ezmq_core::spi::{Delivery, Settle};
use ezmq_core::{Error, Job, Result};

use crate::consumer::{Record, Shared};

/// The handle of one record handed to a listener.
pub(crate) struct KafkaDelivery {
    shared: Arc<Shared>,
    record: Record,
}

impl fmt::Debug for KafkaDelivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaDelivery")
            .field("topic", &self.shared.kafka_topic)
            .field("partition", &self.record.partition)
            .field("offset", &self.record.offset)
            .field("id", &self.record.id)
            .finish()
    }
}

impl KafkaDelivery {
    /// The delivery of `record`, taken from `shared`'s buffer.
    pub(crate) fn deliver(shared: &Arc<Shared>, record: Record) -> Delivery {
        let job = Job::new(record.id.clone(), shared.topic.clone(), record.body.clone())
            .with_headers(record.headers.clone())
            .with_attempt(record.attempt);
        Delivery::new(
            job,
            KafkaDelivery {
                shared: Arc::clone(shared),
                record,
            },
        )
    }

    /// The error of a settle whose partition moved to another member.
    fn moved(&self, what: &str) -> Error {
        tracing::warn!(topic = %self.shared.topic, message_id = %self.record.id, attempt = self.record.attempt, partition = self.record.partition, "{what} after the job's partition moved to another process; it may run twice");
        Error::backend(
            format!(
                "partition {} of Kafka topic {:?} moved to another member before this job was settled",
                self.record.partition, self.shared.kafka_topic
            ),
            false,
        )
    }

    fn settled<T>(&self, what: &str, done: bool, value: T) -> Result<T> {
        self.shared.notify_settled();
        if done {
            Ok(value)
        } else {
            Err(self.moved(what))
        }
    }
}

#[async_trait]
impl Settle for KafkaDelivery {
    async fn ack(&self) -> Result<()> {
        let done = self.shared.lock().finish(&self.record);
        if self.record.key.is_some() {
            // Its key is free: a later record of it may wait in the buffer.
            self.shared.notify_arrived();
        }
        self.settled("acknowledged", done, ())
    }

    async fn retry(&self, delay: Duration) -> Result<()> {
        let mut again = self.record.clone();
        again.attempt = again.attempt.saturating_add(1);
        let done = self.shared.lock().delay(again, Instant::now() + delay);
        self.shared.notify_arrived();
        self.settled("retried", done, ())
    }

    async fn release(&self) -> Result<()> {
        let done = self.shared.lock().release(self.record.clone());
        self.shared.notify_arrived();
        self.settled("released", done, ())
    }

    async fn extend_lease(&self) -> Result<Duration> {
        // A partition's records are never taken back while this member
        // lives (only at a rebalance, after the grace): no lease to
        // extend, as long as the partition is still ours.
        if self.shared.lock().owns(&self.record) {
            Ok(Duration::ZERO)
        } else {
            Err(self.moved("still running"))
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
