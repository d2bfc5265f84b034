//! RabbitMQ's part of the batch scenario: 50 `basic.publish` on a confirm
//! channel, then one wait for their 50 confirms, against
//! `client.push_batch` (which the RabbitMQ backend sends the same way).

use std::sync::Arc;

use bytes::Bytes;
use ezmq_core::Client;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::{BasicProperties, Confirmation};

use super::RabbitBench;
use crate::brokers::RawBroker;
use crate::scenario::batch::{BatchBroker, BatchSender};
use crate::BoxResult;

impl BatchBroker for RabbitBench {
    fn batch_name(&self) -> &'static str {
        self.name()
    }

    fn raw_batch_col(&self) -> &'static str {
        "raw 50 publish, 1 confirm wait"
    }

    fn raw_batch_note(&self) -> &'static str {
        "one `lapin` confirm channel shared by the tasks; each batch is 50 `basic.publish` of a \
         persistent message (mandatory) to a durable quorum queue through the default exchange, \
         one after the other, then one wait for the 50 confirms together (what ezmq does for \
         a batch of default pushes)."
    }

    async fn batch_ezmq(&self) -> BoxResult<Client> {
        self.ezmq().await
    }

    async fn raw_batch_sender(&self, queue: &str) -> BoxResult<BatchSender> {
        let channel = self.conn.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        self.declare(&channel, queue).await?;
        let queue = queue.to_owned();
        Ok(Arc::new(move |bodies: Arc<[Bytes]>| {
            let (channel, queue) = (channel.clone(), queue.clone());
            Box::pin(async move {
                let mut pending = Vec::with_capacity(bodies.len());
                for body in bodies.iter() {
                    pending.push(
                        channel
                            .basic_publish(
                                "".into(),
                                queue.as_str().into(),
                                BasicPublishOptions {
                                    mandatory: true,
                                    ..BasicPublishOptions::default()
                                },
                                body,
                                BasicProperties::default().with_delivery_mode(2),
                            )
                            .await?,
                    );
                }
                for confirm in futures::future::join_all(pending).await {
                    match confirm? {
                        Confirmation::Ack(None) | Confirmation::NotRequested => {}
                        other => {
                            return Err(
                                format!("publish to {queue} not confirmed: {other:?}").into()
                            )
                        }
                    }
                }
                Ok(())
            })
        }))
    }

    async fn batch_cleanup(&self, queue: &str) -> BoxResult<()> {
        self.cleanup(queue).await
    }
}
