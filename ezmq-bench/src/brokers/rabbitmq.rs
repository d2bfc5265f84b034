//! RabbitMQ: raw `lapin` publish-with-confirm / `basic.consume` + ack
//! loops against `ezmq-rabbitmq`.

mod batch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ezmq_core::Client;
use ezmq_rabbitmq::{QueueType, RabbitConfig};
use futures::{FutureExt, StreamExt};
use lapin::message::Delivery;
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
    /// Classic queues (a reference row) instead of ezmq's default quorum
    /// queues.
    classic: bool,
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
            classic: false,
        })
    }

    /// The same broker with classic queues on both sides (ezmq configured
    /// with `QueueType::Classic`): a reference for what quorum queues cost.
    pub(crate) fn with_classic_queues(self) -> Self {
        RabbitBench {
            classic: true,
            ..self
        }
    }

    /// Declares `queue` as ezmq does (durable; quorum unless `classic`)
    /// on `channel`.
    async fn declare(&self, channel: &Channel, queue: &str) -> BoxResult<()> {
        let mut args = FieldTable::default();
        if !self.classic {
            args.insert(
                "x-queue-type".into(),
                AMQPValue::LongString(LongString::from("quorum")),
            );
        }
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
        self.declare(&channel, queue).await?;
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
        if self.classic {
            "RabbitMQ, classic queues (reference)"
        } else {
            "RabbitMQ"
        }
    }

    fn has_goals(&self) -> bool {
        !self.classic
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
            consume: "one `basic.consume` on a channel with `basic.qos` 64; the loop awaits a \
                      delivery, takes every delivery already buffered behind it, then sends one \
                      `basic.ack` with `multiple` for all of them (awaited; what ezmq's batched \
                      acks do; acking each delivery on its own costs the raw loop ~3× the \
                      client CPU); timed until the last ack.",
            latency: "one `basic.consume` (qos 64), latency taken when the delivery arrives, \
                      then acked like the consume loop (`multiple` over what was buffered).",
        }
    }

    async fn ezmq(&self) -> BoxResult<Client> {
        let mut config: RabbitConfig = self.url.parse()?;
        if self.classic {
            config = config.with_queue_type(QueueType::Classic);
        }
        Ok(ezmq_rabbitmq::connect(config).await?)
    }

    async fn raw_sender(&self, queue: &str) -> BoxResult<Sender> {
        let channel = self.conn.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        self.declare(&channel, queue).await?;
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
            let first = match next {
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
            let (last, count) = drain_ready(&mut consumer, first, |_| {})?;
            ack_up_to(&channel, last).await?;
            got += count;
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
                let Some(first) = next else { break };
                let (last, _) = drain_ready(&mut consumer, first?, |d| rec.record(&d.data))?;
                ack_up_to(&channel, last).await?;
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

/// Takes `first` and every delivery already buffered behind it (no
/// waiting), calling `each` on them; returns the last delivery tag and
/// the count.
fn drain_ready(
    consumer: &mut Consumer,
    first: Delivery,
    mut each: impl FnMut(&Delivery),
) -> BoxResult<(u64, u64)> {
    each(&first);
    let (mut last, mut count) = (first.delivery_tag, 1u64);
    while let Some(Some(next)) = consumer.next().now_or_never() {
        let delivery = next?;
        each(&delivery);
        last = delivery.delivery_tag;
        count += 1;
    }
    Ok((last, count))
}

/// `basic.ack` with `multiple`: settles every delivery up to `tag`.
async fn ack_up_to(channel: &Channel, tag: u64) -> BoxResult<()> {
    channel
        .basic_ack(tag, BasicAckOptions { multiple: true })
        .await?;
    Ok(())
}
