//! Kafka's part of the batch scenario: 50 produces started before their
//! delivery reports are awaited together, against `client.push_batch`
//! (which does the same).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ezmq_core::Client;
use rdkafka::producer::FutureRecord;

use super::KafkaBench;
use crate::brokers::RawBroker;
use crate::scenario::batch::{BatchBroker, BatchSender};
use crate::BoxResult;

impl BatchBroker for KafkaBench {
    fn batch_name(&self) -> &'static str {
        self.name()
    }

    fn raw_batch_col(&self) -> &'static str {
        "raw 50 produces, reports awaited together"
    }

    fn raw_batch_note(&self) -> &'static str {
        "one `rdkafka` FutureProducer shared by the tasks (ezmq's settings), each batch 50 \
         sends to ezmq's topic of the queue started together and their delivery reports \
         awaited together."
    }

    async fn batch_ezmq(&self) -> BoxResult<Client> {
        self.ezmq().await
    }

    async fn raw_batch_sender(&self, queue: &str) -> BoxResult<BatchSender> {
        let (producer, topic) = (self.producer.clone(), self.topic(queue).await?);
        Ok(Arc::new(move |bodies: Arc<[Bytes]>| {
            let (producer, topic) = (producer.clone(), topic.clone());
            Box::pin(async move {
                let sends = bodies.iter().map(|body| {
                    producer.send(
                        FutureRecord::<(), [u8]>::to(&topic).payload(&body[..]),
                        Duration::from_secs(5),
                    )
                });
                for sent in futures::future::join_all(sends).await {
                    sent.map_err(|(err, _)| err)?;
                }
                Ok(())
            })
        }))
    }

    async fn batch_cleanup(&self, queue: &str) -> BoxResult<()> {
        self.cleanup(queue).await
    }
}
