//! `KafkaBackend`: ezmq's backend SPI on Kafka topics and consumer
//! groups.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{
    Backend, Capabilities, Capability, ClaimOutcome, Delivery, ExclusiveClaim, FanOut, Peek,
    QueueStats, ReplyChannel, Source,
};
use ezmq_core::{BrokerHealth, Error, Job, JobId, PushOptions, Result, Topic};
use rdkafka::producer::{FutureProducer, Producer};

use crate::claims::ClaimLog;
use crate::cluster::KafkaCluster;
use crate::config::KafkaConfig;
use crate::consumer::record::now_ms;
use crate::consumer::{Consumers, TopicConsumer};
use crate::delay::{self, mover::Mover, Hop};

/// The Kafka backend: a topic's jobs are records of one Kafka topic
/// read by one consumer group; see the crate README for what each
/// feature guarantees.
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// use ezmq_core::{Client, ClientConfig};
/// use ezmq_kafka::{KafkaBackend, KafkaConfig};
///
/// let backend = KafkaBackend::connect(KafkaConfig::new("kafka://127.0.0.1:9092")).await?;
/// let client = Client::new(backend, ClientConfig::default());
/// # let _ = client; Ok(()) }
/// ```
#[derive(Clone)]
pub struct KafkaBackend {
    inner: Arc<Inner>,
}

struct Inner {
    cluster: KafkaCluster,
    producer: FutureProducer,
    consumers: Consumers,
    /// The delay mover, started by the first delayed push or receive.
    mover: tokio::sync::OnceCell<Mover>,
    /// The claim log, read from the first claim on.
    claims: tokio::sync::OnceCell<ClaimLog>,
    closed: AtomicBool,
}

impl fmt::Debug for KafkaBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaBackend")
            .field("cluster", &self.inner.cluster)
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl KafkaBackend {
    /// Connects ([`KafkaCluster::connect`]) and creates the producer.
    pub async fn connect(config: KafkaConfig) -> Result<Self> {
        let cluster = KafkaCluster::connect(config).await?;
        let producer = crate::push::create(cluster.config())?;
        Ok(KafkaBackend {
            inner: Arc::new(Inner {
                cluster,
                producer,
                consumers: Mutex::new(HashMap::new()),
                mover: tokio::sync::OnceCell::new(),
                claims: tokio::sync::OnceCell::new(),
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// The configuration it was connected with.
    pub fn config(&self) -> &KafkaConfig {
        self.inner.cluster.config()
    }

    pub(crate) fn cluster(&self) -> &KafkaCluster {
        &self.inner.cluster
    }

    pub(crate) fn producer(&self) -> &FutureProducer {
        &self.inner.producer
    }

    /// The Kafka topic holding `topic`'s jobs, created first when this
    /// client has not seen it ([`KafkaCluster::queue_topic`]): for tools
    /// and raw clients that read or write the same records.
    pub async fn queue_topic(&self, topic: &Topic) -> Result<String> {
        self.inner.cluster.queue_topic(topic).await
    }

    pub(crate) fn ensure_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }

    /// The client's delay mover, started (with the level topics created)
    /// at the first call: a client that pushes delayed jobs or listens
    /// moves delayed jobs.
    async fn mover(&self) -> Result<&Mover> {
        self.inner
            .mover
            .get_or_try_init(|| async {
                let config = self.config();
                let levels = crate::delay::level_topics(&config.prefix);
                self.inner
                    .cluster
                    .ensure_topics(&levels, config.partitions)
                    .await?;
                Mover::start(config, self.inner.producer.clone(), &levels)
            })
            .await
    }

    /// The client's claim log, read from its start at the first claim.
    async fn claim_log(&self) -> Result<&ClaimLog> {
        self.ensure_open()?;
        self.inner
            .claims
            .get_or_try_init(|| ClaimLog::start(&self.inner.cluster, self.inner.producer.clone()))
            .await
    }

    /// Pushes a job for Kafka topic `destination` with a delay into the
    /// delay level of its wait (or straight to `destination` when its run
    /// time has passed already).
    pub(crate) async fn publish_delayed(
        &self,
        topic: &Topic,
        destination: String,
        body: Bytes,
        options: &PushOptions,
        delay: Duration,
    ) -> Result<JobId> {
        self.mover().await?;
        let now = now_ms();
        let run_at = delay::run_at_ms(&options.headers, delay, now);
        let producer = &self.inner.producer;
        match delay::next_hop(&self.config().prefix, run_at, now) {
            Hop::Destination => {
                crate::push::publish(producer, &destination, topic, &body, options).await
            }
            Hop::Level {
                topic: level,
                due_ms,
            } => {
                let extra = [
                    (delay::DEST_HEADER, destination),
                    (delay::LEVEL_DUE_HEADER, due_ms.to_string()),
                ];
                crate::push::publish_with(producer, &level, topic, &body, options, &extra).await
            }
        }
    }

    /// The Kafka topic and consumer group `source` reads: a queue's topic
    /// and the group named as it, or a broadcast topic and the group's
    /// own (`<prefix>.g.<topic>.<group>`).
    fn names_of(&self, source: &Source) -> (String, String) {
        let prefix = &self.config().prefix;
        let topic = source.topic();
        match source.group() {
            None => {
                let queue = crate::names::queue(prefix, topic);
                (queue.clone(), queue)
            }
            Some(group) => (
                crate::fan_out::broadcast_topic(prefix, topic),
                crate::fan_out::group_id(prefix, topic, group),
            ),
        }
    }

    /// The consumer of `source`, started at its first receive.
    async fn consumer(&self, source: &Source) -> Result<Arc<TopicConsumer>> {
        let (kafka_topic, group) = self.names_of(source);
        let partitions = self.config().partitions;
        self.inner
            .cluster
            .ensure_topic(&kafka_topic, partitions, &[])
            .await?;
        let mut consumers = self
            .inner
            .consumers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(consumer) = consumers.get(&group) {
            return Ok(Arc::clone(consumer));
        }
        let consumer = Arc::new(TopicConsumer::start(
            self.config(),
            source.topic().clone(),
            kafka_topic,
            group.clone(),
        )?);
        consumers.insert(group, Arc::clone(&consumer));
        Ok(consumer)
    }

    fn existing_consumer(&self, source: &Source) -> Option<Arc<TopicConsumer>> {
        let (_, group) = self.names_of(source);
        self.inner
            .consumers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&group)
            .cloned()
    }
}

#[async_trait]
impl Backend for KafkaBackend {
    fn name(&self) -> &'static str {
        "kafka"
    }

    /// Lease extension: a record is never taken back while its
    /// listener's process lives (only when its partition moves, after
    /// the rebalance grace). Delayed delivery: through the delay levels
    /// (see the crate README).
    fn abilities(&self) -> Capabilities {
        Capabilities::none()
            .with(Capability::LeaseExtension)
            .with(Capability::DelayedDelivery)
    }

    async fn publish(&self, topic: &Topic, body: Bytes, options: &PushOptions) -> Result<JobId> {
        self.ensure_open()?;
        let kafka_topic = self.inner.cluster.queue_topic(topic).await?;
        if let Some(delay) = options.delay.filter(|d| !d.is_zero()) {
            return self
                .publish_delayed(topic, kafka_topic, body, options, delay)
                .await;
        }
        crate::push::publish(&self.inner.producer, &kafka_topic, topic, &body, options).await
    }

    async fn pause_receiving(&self, source: &Source) -> Result<()> {
        if let Some(consumer) = self.existing_consumer(source) {
            consumer.pause();
        }
        Ok(())
    }

    async fn receive(&self, source: &Source, max: usize, wait: Duration) -> Result<Vec<Delivery>> {
        self.ensure_open()?;
        self.mover().await?;
        self.consumer(source).await?.receive(max, wait).await
    }

    async fn close(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let consumers: Vec<_> = self
            .inner
            .consumers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(_, consumer)| consumer)
            .collect();
        for consumer in consumers {
            consumer.close().await;
        }
        if let Some(mover) = self.inner.mover.get() {
            mover.close().await;
        }
        if let Some(claims) = self.inner.claims.get() {
            claims.close().await;
        }
        let producer = self.inner.producer.clone();
        let timeout = self.config().command_timeout;
        let flushed = tokio::task::spawn_blocking(move || producer.flush(timeout)).await;
        if let Ok(Err(err)) = flushed {
            tracing::debug!(error = %err, "flushing the Kafka producer at close failed");
        }
        tracing::debug!("Kafka backend closed");
        Ok(())
    }

    /// One metadata request: see `health.rs`.
    async fn health(&self) -> Result<BrokerHealth> {
        self.health_report().await
    }

    fn queue_stats(&self) -> Option<&dyn QueueStats> {
        Some(self)
    }

    fn peek(&self) -> Option<&dyn Peek> {
        Some(self)
    }

    fn exclusive_claim(&self) -> Option<&dyn ExclusiveClaim> {
        Some(self)
    }

    fn reply_channel(&self) -> Option<&dyn ReplyChannel> {
        Some(self)
    }

    fn fan_out(&self) -> Option<&dyn FanOut> {
        Some(self)
    }
}

#[async_trait]
impl ExclusiveClaim for KafkaBackend {
    async fn try_claim(&self, key: &Topic, hold: Duration) -> Result<bool> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let outcome = self.claim_log().await?.claim(key, &token, hold).await?;
        Ok(outcome == ClaimOutcome::Won)
    }

    async fn claim(&self, key: &Topic, token: &str, hold: Duration) -> Result<ClaimOutcome> {
        self.claim_log().await?.claim(key, token, hold).await
    }

    async fn holder(&self, key: &Topic) -> Result<Option<String>> {
        self.claim_log().await?.holder(key).await
    }

    async fn release(&self, key: &Topic, token: &str) -> Result<bool> {
        self.claim_log().await?.release(key, token).await
    }
}

#[async_trait]
impl QueueStats for KafkaBackend {
    async fn queue_len(&self, topic: &Topic) -> Result<u64> {
        self.ensure_open()?;
        let kafka_topic = self.inner.cluster.queue_topic(topic).await?;
        crate::stats::queue_len(self.config(), kafka_topic).await
    }

    /// The topics with a Kafka topic of their own (`<prefix>.q.<topic>`,
    /// from the cluster's metadata): every topic ever pushed to or
    /// consumed, as Kafka keeps a topic until it is deleted.
    async fn topics(&self) -> Result<Option<Vec<Topic>>> {
        self.ensure_open()?;
        let prefix = &self.config().prefix;
        let names = self
            .inner
            .cluster
            .topics_starting_with(&format!("{prefix}.q."))
            .await?;
        let mut topics: Vec<Topic> = names
            .iter()
            .filter_map(|name| crate::names::user_topic_of(prefix, name))
            .collect();
        topics.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        Ok(Some(topics))
    }
}

#[async_trait]
impl Peek for KafkaBackend {
    async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>> {
        self.ensure_open()?;
        let kafka_topic = self.inner.cluster.queue_topic(topic).await?;
        crate::stats::peek(self.config(), topic.clone(), kafka_topic, n).await
    }
}
