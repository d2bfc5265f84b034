//! Request-reply inboxes: exclusive, auto-deleted, server-named queues.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{Inbox, ReplyChannel};
use ezmq_core::{Error, Result};
use futures::{FutureExt, StreamExt};
use lapin::options::{BasicConsumeOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Consumer};

use crate::backend::RabbitBackend;
use crate::error::RabbitError;
use crate::names::short;
use crate::publish::{self, ceil_millis};
use crate::session::close_channel;

#[async_trait]
impl ReplyChannel for RabbitBackend {
    /// Declares an exclusive, auto-deleted classic queue with a
    /// server-generated name (`amq.gen-…`) on a channel of its own and
    /// consumes it without acks. It disappears when the inbox closes, when
    /// the client closes or when its connection drops (an inbox does not
    /// survive a reconnect: its receive then fails).
    async fn open_inbox(&self) -> Result<Box<dyn Inbox>> {
        self.inner.ensure_open()?;
        let session = self.inner.connector.session().await?;
        let channel = session.channel().await?;
        let declare = channel.queue_declare(
            "".into(),
            QueueDeclareOptions::exclusive().auto_delete(),
            FieldTable::default(),
        );
        let queue = session
            .bounded("queue.declare", "(reply inbox)", async {
                declare
                    .await
                    .map_err(|e| RabbitError::amqp("queue.declare", "(reply inbox)", e))
            })
            .await?;
        let address = queue.name().as_str().to_owned();
        let consume = channel.basic_consume(
            queue.name().clone(),
            "".into(),
            BasicConsumeOptions {
                no_ack: true,
                exclusive: true,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        );
        let stream = session
            .bounded("basic.consume", &address, async {
                consume
                    .await
                    .map_err(|e| RabbitError::amqp("basic.consume", address.as_str(), e))
            })
            .await?;
        Ok(Box::new(RabbitInbox {
            address,
            channel,
            timeout: session.timeout(),
            stream: tokio::sync::Mutex::new(stream),
        }))
    }

    /// Publishes (with a confirm) to the inbox's queue through the default
    /// exchange, with `expiration` = `ttl` and not persistent. A reply to
    /// an inbox that is gone is dropped by the broker without an error.
    async fn send_reply(&self, address: &str, body: Bytes, ttl: Duration) -> Result<()> {
        self.inner.ensure_open()?;
        let session = self.inner.connector.session().await?;
        let properties = BasicProperties::default()
            .with_message_id(short("message id", &publish::new_message_id())?)
            .with_delivery_mode(1)
            .with_expiration(ceil_millis(ttl).max(1).to_string().into());
        publish::confirm(&session, "", address, &body, properties, false).await?;
        Ok(())
    }
}

/// An open reply inbox.
struct RabbitInbox {
    address: String,
    channel: Channel,
    /// The session's operation timeout, bounding the close.
    timeout: Duration,
    stream: tokio::sync::Mutex<Consumer>,
}

impl fmt::Debug for RabbitInbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitInbox")
            .field("address", &self.address)
            .finish()
    }
}

#[async_trait]
impl Inbox for RabbitInbox {
    fn address(&self) -> &str {
        &self.address
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Bytes>> {
        let mut stream = self.stream.lock().await;
        let mut out = Vec::new();
        match tokio::time::timeout(wait, stream.next()).await {
            Err(_) => return Ok(out),
            Ok(Some(Ok(delivery))) => out.push(Bytes::from(delivery.data)),
            Ok(Some(Err(err))) => {
                return Err(RabbitError::amqp("basic.consume", self.address.as_str(), err).into())
            }
            Ok(None) => return Err(Error::Shutdown),
        }
        while out.len() < max.max(1) {
            match stream.next().now_or_never() {
                Some(Some(Ok(delivery))) => out.push(Bytes::from(delivery.data)),
                _ => break,
            }
        }
        Ok(out)
    }

    async fn close(&self) -> Result<()> {
        close_channel(&self.channel, self.timeout, &self.address, "inbox closed").await?;
        Ok(())
    }
}
