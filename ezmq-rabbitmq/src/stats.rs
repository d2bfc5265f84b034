//! Queue lengths through a passive declare.

use async_trait::async_trait;
use ezmq_core::spi::QueueStats;
use ezmq_core::{Result, Topic};
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;

use crate::backend::RabbitBackend;
use crate::error::RabbitError;
use crate::names::short;

#[async_trait]
impl QueueStats for RabbitBackend {
    /// The `message_count` of a passive `queue.declare`: messages ready
    /// for delivery in the topic's queue (on a quorum queue, as its leader
    /// knows them). Not counted: messages delivered and not yet acked,
    /// delayed messages (they wait in the delay levels), and retries
    /// waiting out their backoff. A queue that does not exist has 0.
    async fn queue_len(&self, topic: &Topic) -> Result<u64> {
        self.inner.ensure_open()?;
        let session = self.inner.connector.session().await?;
        let queue = self.inner.names.topic_queue(topic);
        // Its own channel: a missing queue closes the channel.
        let channel = session.channel().await?;
        let declared = channel
            .queue_declare(
                short("queue", &queue)?,
                QueueDeclareOptions::default().passive(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| RabbitError::amqp("queue.declare (passive)", queue.as_str(), e));
        if channel.status().connected() {
            let _ = channel.close(200, "counted".into()).await;
        }
        match declared {
            Ok(q) => Ok(u64::from(q.message_count())),
            Err(err) if err.is_not_found() => Ok(0),
            Err(err) => Err(err.into()),
        }
    }
}
