//! `BroadcastExt`: broadcasting methods for every [`Client`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::{
    handler_fn, json_handler, Backend, BoxError, Client, ConsumeOptions, Handler, Job, PushOptions,
    Result,
};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn, Instrument};

use crate::config::BroadcastConfig;
use crate::listener::BroadcastListener;
use crate::names;
use crate::receipt::BroadcastReceipt;
use crate::registry::{Announcer, BroadcastState};

/// Most copies of one broadcast pushed at the same time.
const PUSH_PARALLELISM: usize = 64;

/// Broadcasting (fan-out to consumer groups) for every [`Client`], whatever
/// its backend. Bring it into scope with `use ezmq_broadcast::BroadcastExt`.
///
/// Every broadcast pushed to a topic reaches **each consumer group** of the
/// topic once; inside a group, one member processes it (with the usual ACK,
/// retry and dead-letter behaviour of listeners). See the crate
/// documentation for timing and guarantees.
///
/// ```no_run
/// # async fn demo<B: ezmq_core::Backend>(client: ezmq_core::Client<B>) -> ezmq_core::Result<()> {
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
/// println!("stored for {} groups", receipt.group_count());
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
    /// Returns once the membership is announced on the broker, so every
    /// broadcast pushed [`BroadcastConfig::discovery_interval`] after it
    /// returns (at once on this client) reaches the group.
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
    /// invalid options, a client that is shut down, or when the membership
    /// cannot be announced (the listener is then stopped again).
    ///
    /// [`Error::InvalidTopic`]: ezmq_core::Error::InvalidTopic
    /// [`Error::InvalidOption`]: ezmq_core::Error::InvalidOption
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
    /// group known now, each kept for [`BroadcastConfig::retention`].
    ///
    /// With no group known, nothing is stored and the receipt is empty (a
    /// broadcast nobody subscribed to is not an error).
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

    /// Broadcasts `body` with explicit options, applied to every copy. An
    /// unset `ttl` becomes the retention plus the delay.
    ///
    /// Fails before storing anything for an invalid topic, a body over the
    /// client's `max_payload_bytes`
    /// ([`Error::PayloadTooLarge`](ezmq_core::Error::PayloadTooLarge)),
    /// invalid options or a shut-down client. When storing a copy fails,
    /// the first error is returned; copies for other groups may have been
    /// stored, so pushing again may deliver a second copy to those groups.
    async fn push_broadcast_with(
        &self,
        topic: &str,
        body: Bytes,
        options: PushOptions,
    ) -> Result<BroadcastReceipt>;

    /// The consumer groups of `topic` as the broker knows them now (read
    /// fresh, bypassing and refreshing the cache), sorted.
    async fn broadcast_groups(&self, topic: &str) -> Result<Vec<String>>;
}

fn state<B: Backend>(client: &Client<B>) -> Arc<BroadcastState> {
    client.extension(BroadcastState::default)
}

#[async_trait]
impl<B: Backend> BroadcastExt for Client<B> {
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
        add_member(self, topic, group, handler, options)
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
        push(self, topic, body, options).instrument(span).await
    }

    async fn broadcast_groups(&self, topic: &str) -> Result<Vec<String>> {
        let topic = names::topic(topic)?;
        self.ensure_open()?;
        let registry = names::registry(&topic)?;
        let groups = state(self)
            .groups(self.backend().as_ref(), &registry, true)
            .await?;
        Ok(groups.to_vec())
    }
}

async fn add_member<B: Backend>(
    client: &Client<B>,
    topic: &str,
    group: &str,
    handler: Arc<dyn Handler>,
    options: ConsumeOptions,
) -> Result<BroadcastListener> {
    let (topic, queue) = names::topic_and_group(topic, group)?;
    let registry = names::registry(&topic)?;
    client.ensure_open()?;
    let state = state(client);

    // The group queue is internal; its dead letters go to a user topic.
    let options = match options.dead_letter {
        ezmq_core::DeadLetter::Default => {
            options.with_dead_letter_topic(format!("{topic}.{group}.dead-letter"))
        }
        _ => options,
    };
    let listener = client.listen_to(queue, handler, options)?;
    let mut announcer = Announcer::new(
        Arc::clone(client.backend()),
        Arc::clone(&state),
        registry.clone(),
        group.to_owned(),
    );
    if let Err(err) = announcer.announce().await {
        warn!(cause = %err, "could not announce the membership; stopping the listener");
        listener.stop(Duration::ZERO).await;
        return Err(err);
    }
    // A producer on this client sees its own member at once.
    state.invalidate(&registry).await;

    let stop = client.shutdown_token();
    let done = CancellationToken::new();
    let task = {
        let listener = listener.clone();
        let stop = stop.clone();
        let done = done.clone();
        async move {
            let _done = done.drop_guard();
            announcer.run(listener, stop).await;
        }
    };
    client.spawn(task.instrument(tracing::Span::current()));
    debug!("broadcast member started");
    Ok(BroadcastListener::new(
        topic,
        group.to_owned(),
        listener,
        stop,
        done,
    ))
}

async fn push<B: Backend>(
    client: &Client<B>,
    topic: &str,
    body: Bytes,
    mut options: PushOptions,
) -> Result<BroadcastReceipt> {
    let topic = names::topic(topic)?;
    client.ensure_open()?;
    client.check_payload(&body)?;
    let state = state(client);
    if options.ttl.is_none() {
        let retention = state.config().retention;
        options.ttl = Some(retention.saturating_add(options.delay.unwrap_or_default()));
    }
    options.validate()?;

    let registry = names::registry(&topic)?;
    let groups = state
        .groups(client.backend().as_ref(), &registry, false)
        .await?;
    if groups.is_empty() {
        debug!("no consumer group known; nothing stored");
        return Ok(BroadcastReceipt::new(Vec::new()));
    }

    let mut queues = Vec::with_capacity(groups.len());
    for group in groups.iter() {
        queues.push((group.clone(), names::group_queue(&topic, group)?));
    }
    let options = &options;
    let body = &body;
    let jobs: Vec<_> = futures::stream::iter(queues)
        .map(|(group, queue)| async move {
            let id = client.push_to(&queue, body.clone(), options).await;
            (group, id)
        })
        .buffered(PUSH_PARALLELISM)
        .collect()
        .await;

    let total = jobs.len();
    let stored = jobs.iter().filter(|(_, r)| r.is_ok()).count();
    if stored < total {
        warn!(
            stored,
            failed = total - stored,
            "broadcast stored for only some groups"
        );
    }
    let jobs = jobs
        .into_iter()
        .map(|(group, id)| id.map(|id| (group, id)))
        .collect::<Result<Vec<_>>>()?;
    debug!(groups = jobs.len(), "broadcast stored");
    Ok(BroadcastReceipt::new(jobs))
}
