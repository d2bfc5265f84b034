//! `BroadcastExt`: broadcasting methods for every [`MqClient`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{GroupMembership, Runtime, Source};
use ezmq_core::{
    handler_fn, json_handler, BoxError, ConsumeOptions, Handler, Job, ListenerHandle, MqClient,
    PushOptions, Result, Topic,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn, Instrument};

use crate::config::{BroadcastConfig, BroadcastState};
use crate::listener::BroadcastListener;
use crate::names;
use crate::receipt::BroadcastReceipt;

/// Shortest wait before retrying a membership refresh that failed.
const REFRESH_RETRY: Duration = Duration::from_secs(1);

/// Broadcasting (fan-out to consumer groups) for every [`MqClient`] (an
/// `ezmq_core::Client`, an `Arc<dyn MqClient>`, ...) whose backend reports
/// the [`FanOut`](ezmq_core::spi::Capability::FanOut) capability. Bring it
/// into scope with `use ezmq_broadcast::BroadcastExt`.
///
/// Every broadcast pushed to a topic reaches **each consumer group** of the
/// topic once; inside a group, one member processes it (with the usual ACK,
/// retry and dead-letter behaviour of listeners). See the crate
/// documentation for timing and guarantees. On a backend without fan-out,
/// every method fails at once with
/// [`Error::Unsupported`](ezmq_core::Error::Unsupported).
///
/// ```no_run
/// # async fn demo(client: std::sync::Arc<dyn ezmq_core::MqClient>) -> ezmq_core::Result<()> {
/// use ezmq_broadcast::BroadcastExt;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct PriceChanged { sku: String, cents: u64 }
///
/// // In the search service (every instance uses the group "search"):
/// client.add_broadcast_json_listener("prices", "search", |p: PriceChanged| async move {
///     println!("reindex {}", p.sku);
///     Ok::<(), std::io::Error>(())
/// }).await?;
///
/// // In the pricing service:
/// let receipt = client
///     .push_broadcast_json("prices", &PriceChanged { sku: "A1".into(), cents: 990 })
///     .await?;
/// println!("stored for {:?} groups", receipt.group_count());
/// # Ok(()) }
/// ```
#[async_trait]
pub trait BroadcastExt {
    /// The client's broadcast settings (the defaults until
    /// [`BroadcastExt::set_broadcast_config`] is called).
    fn broadcast_config(&self) -> BroadcastConfig;

    /// Replaces the client's broadcast settings (shared by its clones).
    /// Later operations and the next refresh of running members use them.
    /// Fails with [`Error::InvalidOption`](ezmq_core::Error::InvalidOption)
    /// for values that cannot work.
    fn set_broadcast_config(&self, config: BroadcastConfig) -> Result<()>;

    /// Joins consumer group `group` of broadcast topic `topic` with
    /// `handler`, using default [`ConsumeOptions`].
    ///
    /// Returns once the group exists on the broker with this member in it:
    /// broadcasts pushed from then on reach the group (on Disque, from
    /// other clients within its discovery interval, 1 s).
    async fn add_broadcast_listener(
        &self,
        topic: &str,
        group: &str,
        handler: Arc<dyn Handler>,
    ) -> Result<BroadcastListener> {
        self.add_broadcast_listener_with(topic, group, handler, ConsumeOptions::default())
            .await
    }

    /// [`BroadcastExt::add_broadcast_listener`] with explicit options.
    ///
    /// With [`DeadLetter::Default`](ezmq_core::DeadLetter::Default), copies
    /// that failed for good go to the topic `<topic>.<group>.dead-letter`,
    /// which a normal consume listener can read.
    ///
    /// Fails for an invalid topic ([`Error::InvalidTopic`]) or group name
    /// ([`Error::InvalidOption`] for `group`: same rules as a topic),
    /// invalid options, a client that is shut down, a backend without
    /// fan-out ([`Error::Unsupported`]), or when the group cannot be joined.
    ///
    /// [`Error::InvalidTopic`]: ezmq_core::Error::InvalidTopic
    /// [`Error::InvalidOption`]: ezmq_core::Error::InvalidOption
    /// [`Error::Unsupported`]: ezmq_core::Error::Unsupported
    async fn add_broadcast_listener_with(
        &self,
        topic: &str,
        group: &str,
        handler: Arc<dyn Handler>,
        options: ConsumeOptions,
    ) -> Result<BroadcastListener>;

    /// Joins `group` of `topic` with a closure run for every message.
    async fn add_broadcast_consume_listener<F, Fut, E>(
        &self,
        topic: &str,
        group: &str,
        f: F,
    ) -> Result<BroadcastListener>
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.add_broadcast_listener(topic, group, Arc::new(handler_fn(f)))
            .await
    }

    /// Joins `group` of `topic` with a closure that receives every message
    /// decoded as JSON `T`. A message that does not decode is a
    /// [`Permanent`](ezmq_core::Permanent) failure: it is dead-lettered without retries.
    async fn add_broadcast_json_listener<T, F, Fut, E>(
        &self,
        topic: &str,
        group: &str,
        f: F,
    ) -> Result<BroadcastListener>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.add_broadcast_json_listener_with(topic, group, ConsumeOptions::default(), f)
            .await
    }

    /// [`BroadcastExt::add_broadcast_json_listener`] with explicit options.
    async fn add_broadcast_json_listener_with<T, F, Fut, E>(
        &self,
        topic: &str,
        group: &str,
        options: ConsumeOptions,
        f: F,
    ) -> Result<BroadcastListener>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        let handler = json_handler(f);
        self.add_broadcast_listener_with(topic, group, Arc::new(handler), options)
            .await
    }

    /// Broadcasts `body` on `topic`: stores one copy for every consumer
    /// group that exists now, each kept for [`BroadcastConfig::retention`].
    ///
    /// With no group, nothing is stored and the receipt is empty (a
    /// broadcast nobody subscribed to is not an error). When the backend
    /// cannot tell which groups exist (Disque: no node holding the group
    /// registry answers), it is an error, never a silent no-op.
    async fn push_broadcast(&self, topic: &str, body: Bytes) -> Result<BroadcastReceipt> {
        self.push_broadcast_with(topic, body, PushOptions::default())
            .await
    }

    /// Broadcasts `body`, deliverable after `delay` (never earlier). The
    /// groups are those known at push time; each copy is kept for the
    /// retention after the delay.
    async fn push_broadcast_delay(
        &self,
        topic: &str,
        body: Bytes,
        delay: Duration,
    ) -> Result<BroadcastReceipt> {
        self.push_broadcast_with(topic, body, PushOptions::default().with_delay(delay))
            .await
    }

    /// Broadcasts `value` encoded as JSON.
    async fn push_broadcast_json<T>(&self, topic: &str, value: &T) -> Result<BroadcastReceipt>
    where
        T: Serialize + Sync + ?Sized,
    {
        let body = serde_json::to_vec(value)?;
        self.push_broadcast(topic, body.into()).await
    }

    /// Broadcasts `value` encoded as JSON, deliverable after `delay` (never
    /// earlier).
    async fn push_broadcast_json_delay<T>(
        &self,
        topic: &str,
        value: &T,
        delay: Duration,
    ) -> Result<BroadcastReceipt>
    where
        T: Serialize + Sync + ?Sized,
    {
        let body = serde_json::to_vec(value)?;
        self.push_broadcast_delay(topic, body.into(), delay).await
    }

    /// Broadcasts `body` with explicit options, applied to every copy. An
    /// unset `ttl` becomes the retention plus the delay.
    ///
    /// Fails before storing anything for an invalid topic, a body over the
    /// client's `max_payload_bytes`
    /// ([`Error::PayloadTooLarge`](ezmq_core::Error::PayloadTooLarge)),
    /// invalid options, a delay on a backend without delayed delivery, a
    /// backend without fan-out or a shut-down client. When storing a copy
    /// fails, the first error is returned; copies for other groups may have
    /// been stored, so pushing again may deliver a second copy to those
    /// groups.
    async fn push_broadcast_with(
        &self,
        topic: &str,
        body: Bytes,
        options: PushOptions,
    ) -> Result<BroadcastReceipt>;
}

fn state<C: MqClient + ?Sized>(client: &C) -> Arc<BroadcastState> {
    client.runtime().extension(BroadcastState::default)
}

#[async_trait]
impl<C: MqClient + ?Sized> BroadcastExt for C {
    fn broadcast_config(&self) -> BroadcastConfig {
        state(self).config()
    }

    fn set_broadcast_config(&self, config: BroadcastConfig) -> Result<()> {
        config.validate()?;
        state(self).set_config(config);
        Ok(())
    }

    async fn add_broadcast_listener_with(
        &self,
        topic: &str,
        group: &str,
        handler: Arc<dyn Handler>,
        options: ConsumeOptions,
    ) -> Result<BroadcastListener> {
        let span = tracing::info_span!("broadcast_listener", topic = %topic, group = %group);
        add_member(self.runtime(), topic, group, handler, options)
            .instrument(span)
            .await
    }

    async fn push_broadcast_with(
        &self,
        topic: &str,
        body: Bytes,
        options: PushOptions,
    ) -> Result<BroadcastReceipt> {
        let span = tracing::debug_span!("push_broadcast", topic = %topic);
        push(self.runtime(), topic, body, options)
            .instrument(span)
            .await
    }
}

async fn add_member(
    runtime: &Runtime,
    topic: &str,
    group: &str,
    handler: Arc<dyn Handler>,
    options: ConsumeOptions,
) -> Result<BroadcastListener> {
    let topic = names::topic(topic)?;
    let group = names::group(group)?;
    runtime.ensure_open()?;
    let fan_out = runtime.fan_out()?;
    options.validate()?;
    let config = runtime.extension(BroadcastState::default).config();

    let membership = fan_out.join_group(&topic, &group, config.retention).await?;
    let source = Source::Group {
        topic: topic.clone(),
        group: group.clone(),
    };
    // The core's default dead-letter topic of a group is
    // `<topic>.<group>.dead-letter`, a topic a normal listener can read.
    let listener = match runtime.listen(source, handler, options) {
        Ok(listener) => listener,
        Err(err) => {
            if let Err(leave) = membership.leave().await {
                debug!(cause = %leave, "could not leave the group");
            }
            return Err(err);
        }
    };

    let stop = runtime.shutdown_token();
    let done = CancellationToken::new();
    let task = {
        let listener = listener.clone();
        let stop = stop.clone();
        let done = done.clone();
        let interval = config.refresh_interval();
        async move {
            let _done = done.drop_guard();
            keep_membership(membership, interval, listener, stop).await;
        }
    };
    runtime.spawn(task.instrument(tracing::Span::current()));
    debug!("broadcast member started");
    Ok(BroadcastListener::new(
        topic,
        group.as_str().to_owned(),
        listener,
        stop,
        done,
    ))
}

/// Refreshes the membership every `interval` (sooner after a failure)
/// until `stop` is cancelled or the listener stops, then leaves the group.
async fn keep_membership(
    membership: Box<dyn GroupMembership>,
    interval: Duration,
    listener: ListenerHandle,
    stop: CancellationToken,
) {
    let mut failed = false;
    loop {
        let wait = if failed {
            interval.min(REFRESH_RETRY)
        } else {
            interval
        };
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(wait) => {}
        }
        if !listener.is_running() || stop.is_cancelled() {
            break;
        }
        // Not cancellable: once the member's stop returns, no refresh is in
        // flight.
        failed = match membership.refresh().await {
            Ok(()) => false,
            Err(err) => {
                warn!(
                    topic = %listener.topic(),
                    group = listener.source().group().map(tracing::field::display),
                    cause = %err,
                    "refreshing the group membership failed; retrying"
                );
                true
            }
        };
    }
    if let Err(err) = membership.leave().await {
        debug!(cause = %err, "could not leave the group");
    }
    debug!("group membership ended");
}

async fn push(
    runtime: &Runtime,
    topic: &str,
    body: Bytes,
    mut options: PushOptions,
) -> Result<BroadcastReceipt> {
    let topic: Topic = names::topic(topic)?;
    if options.ttl.is_none() {
        let retention = runtime
            .extension(BroadcastState::default)
            .config()
            .retention;
        options.ttl = Some(retention.saturating_add(options.delay.unwrap_or_default()));
    }
    let groups = runtime.publish_to_groups(&topic, body, &options).await?;
    debug!(?groups, "broadcast stored");
    Ok(BroadcastReceipt::new(groups))
}

#[cfg(test)]
mod tests {
    use ezmq_core::spi::Capability;
    use ezmq_core::{Client, ClientConfig};
    use ezmq_test_support::{assert_unsupported, BareBackend};

    use super::*;

    #[tokio::test]
    async fn fails_at_once_without_fan_out() {
        let client: Arc<dyn MqClient> = Arc::new(Client::new(BareBackend, ClientConfig::default()));
        let listener = client
            .add_broadcast_consume_listener("prices", "search", |_job: Job| async {
                Ok::<(), std::convert::Infallible>(())
            })
            .await;
        assert_unsupported(listener.map(|_| ()), Capability::FanOut);
        let pushed = client.push_broadcast("prices", "x".into()).await;
        assert_unsupported(pushed, Capability::FanOut);
    }
}
