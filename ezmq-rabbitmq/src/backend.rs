//! `RabbitBackend`: the [`Backend`] implementation.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{
    Backend, Capabilities, Capability, Delivery, DeliveryHandle, ExclusiveClaim, FanOut,
    PresenceStore, QueueStats, ReplyChannel, Source,
};
use ezmq_core::{BrokerHealth, Error, JobId, PushOptions, Result, Topic};

use crate::batch;
use crate::config::RabbitConfig;
use crate::consumer::{self, Slot};
use crate::delivery::{self, RabbitDelivery};
use crate::names::Names;
use crate::publish::{self, Outgoing};
use crate::session::Connector;

/// State shared by the backend and the handles of its deliveries.
pub(crate) struct Inner {
    pub(crate) config: RabbitConfig,
    pub(crate) names: Names,
    pub(crate) connector: Connector,
    consumers: StdMutex<HashMap<Source, Slot>>,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inner")
            .field("config", &self.config)
            .field("connector", &self.connector)
            .finish()
    }
}

impl Inner {
    pub(crate) fn consumer_slot(&self, source: &Source) -> Slot {
        match self.consumers.lock() {
            Ok(mut map) => Arc::clone(map.entry(source.clone()).or_default()),
            Err(_) => Slot::default(),
        }
    }

    pub(crate) fn ensure_open(&self) -> Result<()> {
        if self.connector.is_closed() {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }
}

/// The RabbitMQ backend: one AMQP connection (replaced after a broker
/// restart), a publisher-confirm channel, and one channel per consumed
/// source. See the crate README for the topology and the guarantees.
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// use ezmq_core::{Client, ClientConfig};
/// use ezmq_rabbitmq::{RabbitBackend, RabbitConfig};
///
/// let backend = RabbitBackend::connect(RabbitConfig::default()).await?;
/// let client = Client::new(backend, ClientConfig::default());
/// # let _ = client; Ok(()) }
/// ```
#[derive(Clone)]
pub struct RabbitBackend {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for RabbitBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitBackend")
            .field("inner", &self.inner)
            .finish()
    }
}

impl RabbitBackend {
    /// Connects (once, failing with [`Error::Connect`] when the broker does
    /// not answer) and checks the configuration. Later connection losses
    /// are repaired on the next call that needs the broker.
    pub async fn connect(config: RabbitConfig) -> Result<Self> {
        config.validate()?;
        let inner = Arc::new(Inner {
            names: Names::new(&config.queue_prefix),
            connector: Connector::new(config.clone()),
            config,
            consumers: StdMutex::new(HashMap::new()),
        });
        inner.connector.session().await?;
        Ok(RabbitBackend { inner })
    }

    /// The configuration in use.
    pub fn config(&self) -> &RabbitConfig {
        &self.inner.config
    }

    /// The queue a topic is stored in (`<prefix><topic>`).
    pub fn queue_name(&self, topic: &Topic) -> String {
        self.inner.names.topic_queue(topic).into_owned()
    }
}

/// The abilities without an accessor RabbitMQ offers through this
/// backend: delays (the delay levels). No lease extension, no idempotent
/// publish.
pub(crate) fn abilities() -> Capabilities {
    Capabilities::none()
        .with(Capability::DelayedDelivery)
        .with(Capability::RateLimitByKey)
}

#[async_trait]
impl Backend for RabbitBackend {
    fn name(&self) -> &'static str {
        crate::BACKEND_NAME
    }

    fn abilities(&self) -> Capabilities {
        abilities()
    }

    async fn publish(&self, topic: &Topic, body: Bytes, options: &PushOptions) -> Result<JobId> {
        self.inner.ensure_open()?;
        let delay = options.delay.filter(|d| !d.is_zero());
        // The id core stamped: the AMQP message id too.
        let id = publish::push_id(options);
        let queue = self.inner.names.topic_queue(topic);
        let out = Outgoing {
            topic: topic.as_str(),
            queue: &queue,
            body: &body,
            headers: &options.headers,
            message_id: id.as_str(),
            delay,
            ttl: options.ttl,
            declare: true,
        };
        publish::send(&self.inner, &out).await?;
        Ok(id)
    }

    /// Sends every job of the batch on the confirm channel (delayed ones
    /// into their delay level), then waits for all their confirms at once:
    /// one confirm wait for the batch. Each job's stamped id or error, in
    /// order; a nacked job is sent again alone, one without a confirm is
    /// [`Error::OutcomeUnknown`].
    async fn publish_batch(
        &self,
        topic: &Topic,
        jobs: &[(Bytes, PushOptions)],
    ) -> Vec<Result<JobId>> {
        if self.inner.connector.is_closed() {
            return jobs.iter().map(|_| Err(Error::Shutdown)).collect();
        }
        batch::send(&self.inner, topic, jobs).await
    }

    /// Gives back what the source's consumer prefetched: closes its
    /// channel when none of its jobs is running, else cancels the consumer
    /// and nacks its buffered deliveries. The next receive starts a new
    /// consumer.
    async fn pause_receiving(&self, source: &Source) -> Result<()> {
        consumer::pause(&self.inner, source).await
    }

    async fn receive(&self, source: &Source, max: usize, wait: Duration) -> Result<Vec<Delivery>> {
        self.inner.ensure_open()?;
        consumer::receive(&self.inner, source, max, wait).await
    }

    async fn ack_batch(&self, handles: &[DeliveryHandle]) -> Result<()> {
        // Grouped by channel, in order of appearance.
        let mut groups: Vec<(&RabbitDelivery, Vec<u64>)> = Vec::new();
        let mut others = Vec::new();
        for handle in handles {
            match handle.downcast_ref::<RabbitDelivery>() {
                Some(d) => {
                    if !d.claim() {
                        continue;
                    }
                    match groups
                        .iter_mut()
                        .find(|(first, _)| Arc::ptr_eq(&first.tracker, &d.tracker))
                    {
                        Some((_, tags)) => tags.push(d.tag),
                        None => groups.push((d, vec![d.tag])),
                    }
                }
                None => others.push(handle),
            }
        }
        let mut result = Ok(());
        for (first, tags) in &groups {
            if let Err(err) = delivery::ack_group(&first.tracker, tags).await {
                result = Err(err);
            }
        }
        for handle in others {
            if let Err(err) = handle.ack().await {
                result = Err(err);
            }
        }
        result
    }

    fn delivery_deadline(&self) -> Option<Duration> {
        Some(self.inner.config.consumer_timeout)
    }

    async fn close(&self) -> Result<()> {
        if self.inner.connector.is_closed() {
            return Err(Error::Shutdown);
        }
        let slots: Vec<Slot> = self
            .inner
            .consumers
            .lock()
            .map(|mut map| map.drain().map(|(_, slot)| slot).collect())
            .unwrap_or_default();
        for slot in slots {
            // Closing a consumer's channel gives its unacknowledged
            // messages back to the queue at once.
            if let Some(state) = slot.lock().await.take() {
                state.close().await;
            }
        }
        self.inner.connector.close().await;
        Ok(())
    }

    /// The connection's state and one passive declaration: see
    /// `health.rs`.
    async fn health(&self) -> Result<BrokerHealth> {
        crate::health::report(&self.inner).await
    }

    fn queue_stats(&self) -> Option<&dyn QueueStats> {
        Some(self)
    }

    fn exclusive_claim(&self) -> Option<&dyn ExclusiveClaim> {
        Some(self)
    }

    fn fan_out(&self) -> Option<&dyn FanOut> {
        Some(self)
    }

    fn reply_channel(&self) -> Option<&dyn ReplyChannel> {
        Some(self)
    }

    fn presence_store(&self) -> Option<&dyn PresenceStore> {
        Some(self)
    }
}
