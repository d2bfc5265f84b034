//! RabbitMQ: raw `lapin` publish-with-confirm / `basic.consume` + ack
//! loops against `ezmq-rabbitmq`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ezmq_core::Client;
use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, Consumer};
use tokio::task::JoinHandle;

use crate::brokers::{RawBroker, RawNotes, Sender};
use crate::scenario::latency::Recorder;
use crate::BoxResult;

/// The default URL (`EZMQ_TEST_AMQP_URL` overrides it).
pub(crate) const DEFAULT_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A RabbitMQ broker and the raw connection to it.
pub(crate) struct RabbitBench {
    url: String,
    conn: Connection,
}

impl RabbitBench {
    /// Connects to `url`.
    pub(crate) async fn connect(url: &str) -> BoxResult<Self> {
        let conn = tokio::time::timeout(
            Duration::from_secs(3),
            Connection::connect(url, ConnectionProperties::default()),
        )
        .await
        .map_err(|_| format!("no answer from {url}"))??;
        Ok(RabbitBench {
            url: url.to_owned(),
            conn,
        })
    }

    /// Declares `queue` as ezmq does by default (durable quorum queue) on
    /// `channel`.
    async fn declare(channel: &Channel, queue: &str) -> BoxResult<()> {
        let mut args = FieldTable::default();
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString(LongString::from("quorum")),
        );
        channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                args,
            )
            .await?;
        Ok(())
    }

    /// A consumer of `queue` with prefetch `k` on a channel of its own.
    async fn consumer(&self, queue: &str, k: usize) -> BoxResult<(Channel, Consumer)> {
        let channel = self.conn.create_channel().await?;
        Self::declare(&channel, queue).await?;
        channel
            .basic_qos(
                u16::try_from(k).unwrap_or(u16::MAX),
                BasicQosOptions { global: false },
            )
            .await?;
        let consumer = channel
            .basic_consume(
                queue.into(),
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        Ok((channel, consumer))
    }
}

impl RawBroker for RabbitBench {
    fn name(&self) -> &'static str {
        "RabbitMQ"
    }

    fn p99_goal(&self) -> Duration {
        Duration::from_millis(5)
    }

    fn raw_notes(&self) -> RawNotes {
        RawNotes {
            push_col: "raw publish+confirm",
            consume_col: "raw consume+ack loop",
            push: "one `lapin` confirm channel shared by the tasks, `basic.publish` of a \
                   persistent message (mandatory) to a durable quorum queue through the default \
                   exchange, awaiting its confirm (what ezmq does for a default push).",
            consume: "one `basic.consume` on a channel with `basic.qos` 64, each delivery acked \
                      on its own (`basic.ack`, awaited) as it arrives; timed until the last \
                      ack.",
            latency: "one `basic.consume` (qos 64), latency taken when the delivery arrives, \
                      then acked.",
        }
    }

    async fn ezmq(&self) -> BoxResult<Client> {
        Ok(ezmq_rabbitmq::connect_url(&self.url).await?)
    }

    async fn raw_sender(&self, queue: &str) -> BoxResult<Sender> {
        let channel = self.conn.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Self::declare(&channel, queue).await?;
        let queue = queue.to_owned();
        Ok(Arc::new(move |body| {
            let (channel, queue) = (channel.clone(), queue.clone());
            Box::pin(async move {
                let confirm = channel
                    .basic_publish(
                        "".into(),
                        queue.as_str().into(),
                        BasicPublishOptions {
                            mandatory: true,
                            ..BasicPublishOptions::default()
                        },
                        &body,
                        BasicProperties::default().with_delivery_mode(2),
                    )
                    .await?
                    .await?;
                match confirm {
                    Confirmation::Ack(None) | Confirmation::NotRequested => Ok(()),
                    other => Err(format!("publish to {queue} not confirmed: {other:?}").into()),
                }
            })
        }))
    }

    async fn raw_consume(&self, queue: &str, n: u64, k: usize) -> BoxResult<Duration> {
        let (channel, mut consumer) = self.consumer(queue, k).await?;
        let start = Instant::now();
        let mut got = 0u64;
        while got < n {
            let next =
                tokio::time::timeout_at((start + super::DRAIN_LIMIT).into(), consumer.next()).await;
            let delivery = match next {
                Ok(Some(delivery)) => delivery?,
                Ok(None) => return Err("raw consume: the consumer was cancelled".into()),
                Err(_) => {
                    return Err(format!(
                        "raw consume: only {got} of {n} in {:?}",
                        super::DRAIN_LIMIT
                    )
                    .into())
                }
            };
            delivery.ack(BasicAckOptions::default()).await?;
            got += 1;
        }
        let elapsed = start.elapsed();
        channel.close(200, "done".into()).await?;
        Ok(elapsed)
    }

    async fn raw_receiver(
        &self,
        queue: &str,
        k: usize,
        rec: Arc<Recorder>,
        stop: Arc<AtomicBool>,
    ) -> BoxResult<JoinHandle<BoxResult<()>>> {
        let (channel, mut consumer) = self.consumer(queue, k).await?;
        Ok(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let Ok(next) =
                    tokio::time::timeout(Duration::from_millis(100), consumer.next()).await
                else {
                    continue;
                };
                let Some(delivery) = next else { break };
                let delivery = delivery?;
                rec.record(&delivery.data);
                delivery.ack(BasicAckOptions::default()).await?;
            }
            channel.close(200, "done".into()).await?;
            Ok(())
        }))
    }

    async fn cleanup(&self, queue: &str) -> BoxResult<()> {
        let channel = self.conn.create_channel().await?;
        channel
            .queue_delete(queue.into(), QueueDeleteOptions::default())
            .await?;
        channel.close(200, "done".into()).await?;
        Ok(())
    }
}
