//! Presence records ([`PresenceStore`]) on a stream queue, since AMQP
//! 0-9-1 cannot peek a classic one.
//!
//! The stream `<prefix>__ezmq|presence` (durable, `x-max-age` 2 minutes in
//! segments of 1 MB, so it stays small) takes every record with a confirm.
//! A reader consumes it from `window` ago (`x-stream-offset` as an
//! interval) on a channel of its own: streams are read without being
//! consumed, by any number of readers. To know where the stream ends, the
//! reader first writes a *marker* (an empty message whose id only it
//! knows) and reads until it gets its marker back: every record confirmed
//! before the read started is then in hand.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::PresenceStore;
use ezmq_core::Result;
use futures::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::BasicProperties;

use crate::backend::RabbitBackend;
use crate::error::RabbitError;
use crate::names::short;
use crate::publish;
use crate::session::{close_channel, within, Session};
use crate::topology::{self, string};

/// What a marker's message id starts with.
const MARKER: &str = "ezmq-presence-marker-";
/// Records a reader has unacknowledged at most (a stream consumer needs a
/// prefetch).
const PREFETCH: u16 = 500;
/// How long a record stays in the stream at least.
const MAX_AGE: &str = "2m";
/// The stream's segment size: retention drops whole segments.
const SEGMENT_BYTES: i64 = 1_000_000;

impl RabbitBackend {
    fn presence_queue(&self) -> String {
        self.inner.names.presence_stream()
    }

    /// Declares the stream (idempotent: same arguments every time).
    async fn declare_presence(&self, session: &Session, queue: &str) -> Result<()> {
        let channel = session.channel().await?;
        let mut args = FieldTable::default();
        args.insert("x-queue-type".into(), string("stream"));
        args.insert("x-max-age".into(), string(MAX_AGE));
        args.insert(
            "x-stream-max-segment-size-bytes".into(),
            AMQPValue::LongLongInt(SEGMENT_BYTES),
        );
        let options = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        let declared = session
            .bounded(
                "queue.declare",
                queue,
                topology::declare_queue(&channel, queue, options, args),
            )
            .await;
        let _ = close_channel(&channel, session.timeout(), queue, "declared").await;
        declared.map(drop).map_err(Into::into)
    }

    async fn append(&self, session: &Session, queue: &str, id: &str, body: &[u8]) -> Result<()> {
        let properties = BasicProperties::default()
            .with_message_id(short("message id", id)?)
            .with_delivery_mode(2);
        publish::confirm(session, "", queue, body, properties, false).await?;
        Ok(())
    }
}

#[async_trait]
impl PresenceStore for RabbitBackend {
    /// Appends the record to the stream, with a confirm.
    async fn write(&self, record: Bytes, _ttl: Duration) -> Result<()> {
        self.inner.ensure_open()?;
        let session = self.inner.connector.session().await?;
        let queue = self.presence_queue();
        self.declare_presence(&session, &queue).await?;
        self.append(&session, &queue, &publish::new_message_id(), &record)
            .await
    }

    /// Writes a marker, then reads the stream from `window` ago until the
    /// marker comes back.
    async fn read(&self, window: Duration) -> Result<Vec<Bytes>> {
        self.inner.ensure_open()?;
        let session = self.inner.connector.session().await?;
        let queue = self.presence_queue();
        self.declare_presence(&session, &queue).await?;
        let marker = format!("{MARKER}{}", uuid::Uuid::new_v4().simple());
        self.append(&session, &queue, &marker, b"").await?;

        let channel = session.channel().await?;
        let timeout = session.timeout();
        let read = async {
            let qos = channel.basic_qos(PREFETCH, BasicQosOptions { global: false });
            within(timeout, "basic.qos", &queue, async {
                qos.await
                    .map_err(|e| RabbitError::amqp("basic.qos", &queue, e))
            })
            .await?;
            let mut args = FieldTable::default();
            args.insert(
                "x-stream-offset".into(),
                string(&format!("{}s", window.as_secs().max(1))),
            );
            let consume = channel.basic_consume(
                short("queue", &queue)?,
                "".into(),
                BasicConsumeOptions::default(),
                args,
            );
            let mut stream = within(timeout, "basic.consume", &queue, async {
                consume
                    .await
                    .map_err(|e| RabbitError::amqp("basic.consume", &queue, e))
            })
            .await?;
            let mut records = Vec::new();
            let deadline = tokio::time::Instant::now() + timeout;
            loop {
                let next = tokio::time::timeout_at(deadline, stream.next()).await;
                let delivery = match next {
                    Ok(Some(Ok(delivery))) => delivery,
                    Ok(Some(Err(e))) => return Err(RabbitError::amqp("basic.deliver", &queue, e)),
                    Ok(None) => {
                        return Err(RabbitError::ConsumerEnded {
                            target: queue.clone(),
                        })
                    }
                    Err(_) => {
                        return Err(RabbitError::Timeout {
                            op: "reading presence",
                            target: queue.clone(),
                        })
                    }
                };
                let id = delivery
                    .properties
                    .message_id()
                    .as_ref()
                    .map(|id| id.as_str().to_owned())
                    .unwrap_or_default();
                let _ = delivery.acker.ack(BasicAckOptions::default()).await;
                if id == marker {
                    return Ok(records);
                }
                if !id.starts_with(MARKER) {
                    records.push(Bytes::from(delivery.data));
                }
            }
        }
        .await;
        let _ = close_channel(&channel, timeout, &queue, "read").await;
        Ok(read?)
    }
}
