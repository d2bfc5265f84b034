//! Queue lengths through a queue declaration.

use async_trait::async_trait;
use ezmq_core::spi::QueueStats;
use ezmq_core::{Result, Topic};

use crate::backend::RabbitBackend;
use crate::topology;

#[async_trait]
impl QueueStats for RabbitBackend {
    /// The `message_count` of a `queue.declare` of the topic's queue:
    /// messages ready for delivery (on a quorum queue, as its leader knows
    /// them). Not counted: messages delivered and not yet acked, delayed
    /// messages (they wait in the delay levels), and retries waiting out
    /// their backoff. The declaration is the one a push or a listener
    /// makes, so a topic nobody used yet gets its (empty) queue and 0.
    ///
    /// Not a passive declaration: the broker answers one for a missing
    /// queue by closing the channel, and lapin then mixes up channel ids
    /// as it reuses them (a later `channel.open` failed with that 404).
    async fn queue_len(&self, topic: &Topic) -> Result<u64> {
        self.inner.ensure_open()?;
        let session = self.inner.connector.session().await?;
        let queue = self.inner.names.topic_queue(topic);
        let ready = topology::topic_queue_len(&session, &self.inner.config, &queue).await?;
        Ok(u64::from(ready))
    }
}
