//! NATS's part of the batch scenario: 50 JetStream publishes sent before
//! their acknowledgements are awaited together, against
//! `client.push_batch` (which does the same).

use std::sync::Arc;

use bytes::Bytes;
use ezmq_core::Client;

use super::NatsBench;
use crate::brokers::RawBroker;
use crate::scenario::batch::{BatchBroker, BatchSender};
use crate::BoxResult;

impl BatchBroker for NatsBench {
    fn batch_name(&self) -> &'static str {
        self.name()
    }

    fn raw_batch_col(&self) -> &'static str {
        "raw 50 publishes, acks awaited together"
    }

    fn raw_batch_note(&self) -> &'static str {
        "one `async-nats` connection shared by the tasks, each batch 50 JetStream publishes to \
         ezmq's subject of the queue sent one after another, then their 50 acknowledgements \
         awaited together."
    }

    async fn batch_ezmq(&self) -> BoxResult<Client> {
        self.ezmq().await
    }

    async fn raw_batch_sender(&self, queue: &str) -> BoxResult<BatchSender> {
        let (js, subject) = (self.js.clone(), self.subject(queue)?);
        Ok(Arc::new(move |bodies: Arc<[Bytes]>| {
            let (js, subject) = (js.clone(), subject.clone());
            Box::pin(async move {
                let mut acks = Vec::with_capacity(bodies.len());
                for body in bodies.iter() {
                    acks.push(js.publish(subject.clone(), body.clone()).await?);
                }
                for ack in futures::future::join_all(
                    acks.into_iter().map(std::future::IntoFuture::into_future),
                )
                .await
                {
                    ack?;
                }
                Ok(())
            })
        }))
    }

    async fn batch_cleanup(&self, queue: &str) -> BoxResult<()> {
        self.cleanup(queue).await
    }
}
