//! The core trait every broker crate implements.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::Result;
use crate::health::BrokerHealth;
use crate::job::JobId;
use crate::push_options::PushOptions;
use crate::topic::Topic;

use super::capability::{Capabilities, Capability};
use super::claim::ExclusiveClaim;
use super::delivery::{Delivery, DeliveryHandle};
use super::fan_out::FanOut;
use super::job_store::JobStore;
use super::presence_store::PresenceStore;
use super::rate_limiter::RateLimiter;
use super::reply::ReplyChannel;
use super::source::Source;
use super::stats::{Peek, QueueStats};

/// A message broker as seen by ezmq.
///
/// Implementations are shared (`Arc`) between every task of a client and
/// must be safe to call concurrently. Optional abilities are handed out by
/// the accessors at the bottom (each `None` by default); those without an
/// accessor are reported by [`Backend::abilities`]. [`Backend::capabilities`]
/// is derived from both, so what a backend reports is what it hands out.
#[async_trait]
pub trait Backend: std::any::Any + Send + Sync + fmt::Debug {
    /// The broker's name in errors and spans: `disque`, `redis`, `rabbitmq`.
    fn name(&self) -> &'static str;

    /// The abilities no accessor hands out that this backend has:
    /// [`Capability::DelayedDelivery`], [`Capability::LeaseExtension`],
    /// [`Capability::IdempotentPush`], and [`Capability::RateLimitByKey`]
    /// when its deliveries implement [`Settle::defer`](super::Settle::defer)
    /// (reported only with a rate limiter or claims to reserve starts
    /// in). Any other capability in the set is ignored:
    /// [`Backend::capabilities`] takes those from the accessors.
    fn abilities(&self) -> Capabilities;

    /// What this backend can do beyond the core calls:
    /// [`Backend::abilities`] plus every capability whose accessor returns
    /// `Some` ([`Backend::queue_stats`], [`Backend::peek`],
    /// [`Backend::exclusive_claim`], [`Backend::fan_out`],
    /// [`Backend::reply_channel`], [`Backend::job_store`]), and
    /// [`Capability::RateLimit`] when there is a [`Backend::rate_limiter`]
    /// or claims to build one on, and [`Capability::GlobalConcurrency`]
    /// and [`Capability::Priorities`] with claims. Backends do not
    /// override it; a wrapper
    /// forwards the accessors and [`Backend::abilities`] instead.
    fn capabilities(&self) -> Capabilities {
        let own = self.abilities();
        let mut caps = [
            Capability::DelayedDelivery,
            Capability::LeaseExtension,
            Capability::IdempotentPush,
        ]
        .into_iter()
        .filter(|c| own.has(*c))
        .collect::<Capabilities>();
        for (capability, present) in [
            (Capability::QueueStats, self.queue_stats().is_some()),
            (Capability::Peek, self.peek().is_some()),
            (Capability::ExclusiveClaim, self.exclusive_claim().is_some()),
            (Capability::FanOut, self.fan_out().is_some()),
            (Capability::RequestReply, self.reply_channel().is_some()),
            (Capability::JobStore, self.job_store().is_some()),
            // Core builds a rate limiter on claims where the backend has
            // none of its own (`flow::claim_rate`).
            (
                Capability::RateLimit,
                self.rate_limiter().is_some() || self.exclusive_claim().is_some(),
            ),
            // Core's slots are claims (`flow::claim_slots`).
            (
                Capability::GlobalConcurrency,
                self.exclusive_claim().is_some(),
            ),
            // Core's lanes are queues, marked with a claim (`lane_mark`).
            (Capability::Priorities, self.exclusive_claim().is_some()),
            // Deferred deliveries, and starts reserved in the backend's
            // limiter or in core's claims (`flow::claim_keys`).
            (
                Capability::RateLimitByKey,
                own.has(Capability::RateLimitByKey)
                    && (self.rate_limiter().is_some() || self.exclusive_claim().is_some()),
            ),
        ] {
            if present {
                caps = caps.with(capability);
            }
        }
        caps
    }

    /// Stores a message; returns once the broker confirmed it (as the
    /// backend's durability settings say), with its id. Only called with
    /// a delay when the backend reports
    /// [`Capability::DelayedDelivery`].
    ///
    /// Core has stamped the job ([`JobMeta::stamp`](crate::JobMeta::stamp)):
    /// its id and metadata are in `options.headers`, which the backend
    /// stores as they are and gives back on every delivery; the id it
    /// returns and delivers is the `ezmq-message-id` header's.
    /// `options.message_id` is set only when the producer chose the id:
    /// that is the one to deduplicate on
    /// ([`Capability::IdempotentPush`]).
    async fn publish(&self, topic: &Topic, body: Bytes, options: &PushOptions) -> Result<JobId>;

    /// Stores several stamped messages of one topic; each one's id or
    /// error, in order. The default publishes them concurrently (which a
    /// multiplexed connection pipelines); backends with a cheaper batch
    /// (one pipeline, one confirm wait) override it.
    async fn publish_batch(
        &self,
        topic: &Topic,
        jobs: &[(Bytes, PushOptions)],
    ) -> Vec<Result<JobId>> {
        let sends = jobs
            .iter()
            .map(|(body, options)| self.publish(topic, body.clone(), options));
        futures::future::join_all(sends).await
    }

    /// The listener on `source` stops receiving, for a while (paused) or
    /// for good (stopped; its running jobs are still settled after this):
    /// give back whatever the backend holds prefetched for it, so other
    /// consumers get those jobs now. The next
    /// [`Backend::receive`] starts again. The default does nothing (a
    /// backend that prefetches nothing).
    async fn pause_receiving(&self, source: &Source) -> Result<()> {
        let _ = source;
        Ok(())
    }

    /// Takes up to `max` messages from `source`, waiting up to `wait` for
    /// the first one; an empty vector means none arrived in time.
    ///
    /// A received message belongs to the caller until its handle settles
    /// it, or the broker redelivers it (lease expired, consumer gone).
    /// Dropping the returned future must not lose a message.
    async fn receive(&self, source: &Source, max: usize, wait: Duration) -> Result<Vec<Delivery>>;

    /// Acknowledges several deliveries at once (listeners call it with the
    /// jobs that finished together). An error means some may not be
    /// acknowledged; the caller then acks them one by one. The default
    /// acks each handle concurrently; backends with a multi-message ack
    /// override it.
    async fn ack_batch(&self, handles: &[DeliveryHandle]) -> Result<()> {
        let acks = futures::future::join_all(handles.iter().map(DeliveryHandle::ack)).await;
        acks.into_iter().collect()
    }

    /// The longest a handler may run before the broker takes its message
    /// back whatever the listener does (RabbitMQ's `consumer_timeout`);
    /// listeners warn as a handler gets near it. `None`: no such limit.
    fn delivery_deadline(&self) -> Option<Duration> {
        None
    }

    /// Closes every connection. Calls after `close` fail with
    /// [`Error::Shutdown`](crate::Error::Shutdown).
    async fn close(&self) -> Result<()>;

    /// The broker's health, for tools
    /// ([`Admin::health`](crate::Admin::health) adds how long it took):
    /// the server's product, then the facts its client can ask cheaply —
    /// one round trip or a few, never a scan — such as its version, mode
    /// and uptime, and one [`NodeHealth`](crate::NodeHealth) per node it
    /// is made of (a single server is one node, `server`), up when it
    /// answered now.
    ///
    /// A node that does not answer is
    /// [`NodeHealth::down`](crate::NodeHealth::down), not an error: the
    /// report is still `Ok`, with what the other nodes told. Never put an
    /// address, a URL, a user name or a password in it, nor an error's
    /// text (it can hold an address): name nodes by their id or role.
    ///
    /// The default reports the backend's [`Backend::name`] and nothing
    /// else. A wrapper forwards it.
    async fn health(&self) -> Result<BrokerHealth> {
        Ok(BrokerHealth::new(self.name()))
    }

    /// [`QueueStats`], when the backend has it.
    fn queue_stats(&self) -> Option<&dyn QueueStats> {
        None
    }

    /// [`Peek`], when the backend has it.
    fn peek(&self) -> Option<&dyn Peek> {
        None
    }

    /// [`ExclusiveClaim`], when the backend has it.
    fn exclusive_claim(&self) -> Option<&dyn ExclusiveClaim> {
        None
    }

    /// [`FanOut`], when the backend has it.
    fn fan_out(&self) -> Option<&dyn FanOut> {
        None
    }

    /// [`ReplyChannel`], when the backend has it.
    fn reply_channel(&self) -> Option<&dyn ReplyChannel> {
        None
    }

    /// [`JobStore`], when the backend has it.
    fn job_store(&self) -> Option<&dyn JobStore> {
        None
    }

    /// The backend's own [`PresenceStore`], for a broker without [`Peek`]
    /// (where core keeps presence records itself).
    fn presence_store(&self) -> Option<&dyn PresenceStore> {
        None
    }

    /// The backend's own [`RateLimiter`], when it has one. Without it,
    /// rate-limited listeners use core's limiter on
    /// [`Backend::exclusive_claim`].
    fn rate_limiter(&self) -> Option<&dyn RateLimiter> {
        None
    }
}
