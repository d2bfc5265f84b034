//! Broadcast: a fan-out exchange per topic, a queue per group.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{FanOut, GroupMembership};
use ezmq_core::{Error, PushOptions, Result, Topic};
use lapin::BasicProperties;

use crate::backend::{Inner, RabbitBackend};
use crate::names::short;
use crate::publish::{self, ceil_millis};
use crate::topology;

/// Why a delayed broadcast is refused: the delay levels end in an
/// exchange that routes a message to one queue by name, so a delayed
/// message cannot reach a topic's fan-out exchange and its groups.
pub const DELAYED_BROADCAST: &str =
    "RabbitMQ cannot delay a broadcast (ezmq's delay levels deliver \
     to one queue by name, not to a topic's fan-out exchange): broadcast without a delay, or push \
     the delayed job to a topic whose handler broadcasts it when it arrives";

#[async_trait]
impl FanOut for RabbitBackend {
    fn cannot_delay_broadcasts(&self) -> Option<&'static str> {
        Some(DELAYED_BROADCAST)
    }

    /// Publishes (with a confirm) to the topic's fan-out exchange; RabbitMQ
    /// copies it into every group queue bound now. The number of groups is
    /// not known: `None`. The copies carry the job id core stamped (the
    /// AMQP `message_id` too). A delay is refused with
    /// [`Error::InvalidOption`] (option `delay`, see [`DELAYED_BROADCAST`]),
    /// before anything is sent.
    async fn publish_to_groups(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<Option<usize>> {
        self.inner.ensure_open()?;
        if options.delay.is_some_and(|d| !d.is_zero()) {
            return Err(Error::invalid_option("delay", DELAYED_BROADCAST));
        }
        let session = self.inner.connector.session().await?;
        let exchange = self.inner.names.fanout_exchange(topic);
        topology::fanout_exchange(&session, &self.inner.config, &exchange).await?;
        let id = publish::push_id(options);
        let mut properties = BasicProperties::default()
            .with_message_id(short("message id", id.as_str())?)
            .with_delivery_mode(if self.inner.config.persistent { 2 } else { 1 })
            .with_headers(publish::header_table(&options.headers)?);
        if let Some(ttl) = options.ttl {
            properties = properties.with_expiration(ceil_millis(ttl).to_string().into());
        }
        // Not mandatory: a topic without groups has nobody to deliver to.
        publish::confirm(&session, &exchange, "", &body, properties, false).await?;
        Ok(None)
    }

    /// Declares the group's queue (`x-expires` = `retention`) bound to the
    /// topic's exchange. Members of a group consume that one queue.
    async fn join_group(
        &self,
        topic: &Topic,
        group: &Topic,
        retention: Duration,
    ) -> Result<Box<dyn GroupMembership>> {
        self.inner.ensure_open()?;
        let membership = Membership {
            inner: Arc::clone(&self.inner),
            exchange: self.inner.names.fanout_exchange(topic),
            queue: self.inner.names.group_queue(topic, group),
            retention,
        };
        membership.declare().await?;
        Ok(Box::new(membership))
    }
}

/// A member's hold on its group queue.
struct Membership {
    inner: Arc<Inner>,
    exchange: String,
    queue: String,
    retention: Duration,
}

impl fmt::Debug for Membership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Membership")
            .field("queue", &self.queue)
            .field("retention", &self.retention)
            .finish()
    }
}

impl Membership {
    async fn declare(&self) -> Result<()> {
        let session = self.inner.connector.session().await?;
        topology::group_queue(
            &session,
            &self.inner.config,
            &self.exchange,
            &self.queue,
            self.retention,
        )
        .await?;
        Ok(())
    }
}

#[async_trait]
impl GroupMembership for Membership {
    /// Declares the queue again: it restarts its expiry timer, and
    /// recreates it if it expired meanwhile.
    async fn refresh(&self) -> Result<()> {
        self.inner.ensure_open()?;
        self.declare().await
    }

    /// Nothing: the queue stays for the other members, or until it expires
    /// `retention` after the last member left.
    async fn leave(&self) -> Result<()> {
        Ok(())
    }
}
