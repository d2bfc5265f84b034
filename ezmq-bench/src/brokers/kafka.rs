//! Kafka: raw `rdkafka` loops on ezmq's own topics (a produce awaited for
//! its delivery report, with the producer settings ezmq uses; a consumer
//! group member polling, storing each offset and auto-committing)
//! against `ezmq-kafka`, with the default prefix `ezmq`. On nisshi, the
//! test broker, the absolute numbers are a SQL store's; the ratios are
//! what the rows compare.

mod batch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ezmq_core::{Client, MqClient, Topic};
use ezmq_kafka::KafkaBackend;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::Message;
use tokio::task::JoinHandle;

use crate::brokers::{RawBroker, RawNotes, Sender};
use crate::scenario::latency::Recorder;
use crate::BoxResult;

/// The default URL (`EZMQ_TEST_KAFKA_URL` overrides it).
pub(crate) const DEFAULT_URL: &str = "kafka://127.0.0.1:9092";

/// A Kafka broker, a raw producer on it, and an ezmq client that names
/// (and creates) ezmq's topics.
pub(crate) struct KafkaBench {
    url: String,
    bootstrap: String,
    producer: FutureProducer,
    names: Client,
}

impl KafkaBench {
    /// Connects to `url` with an ezmq client and a raw producer.
    pub(crate) async fn connect(url: &str) -> BoxResult<Self> {
        let names = tokio::time::timeout(Duration::from_secs(5), ezmq_kafka::connect_url(url))
            .await
            .map_err(|_| format!("no answer from {url}"))??;
        let bootstrap = url.trim_start_matches("kafka://").to_owned();
        let producer = producer(&bootstrap)?;
        Ok(KafkaBench {
            url: url.to_owned(),
            bootstrap,
            producer,
            names,
        })
    }

    /// The Kafka topic of `queue` (created by the ezmq client).
    async fn topic(&self, queue: &str) -> BoxResult<String> {
        let backend = self
            .names
            .runtime()
            .backend_as::<KafkaBackend>()
            .ok_or("the ezmq client is not on Kafka")?;
        // Core's internal names (a priority lane's queue) are built, not
        // parsed: `__ezmq|<kind>|<part>…`.
        let topic = match queue.strip_prefix("__ezmq|") {
            Some(internal) => {
                let mut parts = internal.split('|');
                let kind = parts.next().unwrap_or_default();
                Topic::internal(kind, &parts.collect::<Vec<_>>())?
            }
            None => Topic::new(queue)?,
        };
        Ok(backend.queue_topic(&topic).await?)
    }

    /// A raw group member of `topic` (a group of its own), subscribed.
    fn raw_consumer(&self, topic: &str) -> BoxResult<BaseConsumer> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", format!("raw-{}", uuid::Uuid::new_v4().simple()))
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("enable.auto.commit", "true")
            .set("enable.auto.offset.store", "false")
            .set("auto.commit.interval.ms", "500")
            .set("auto.offset.reset", "earliest")
            .set("fetch.wait.max.ms", "100")
            .create()?;
        consumer.subscribe(&[topic])?;
        Ok(consumer)
    }
}

/// A producer with ezmq's settings (idempotent, acks=all, linger 1 ms).
fn producer(bootstrap: &str) -> BoxResult<FutureProducer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "1")
        .set("message.timeout.ms", "5000")
        .create()?)
}

/// Polls `consumer` until `stop` says so, handing each record's payload
/// to `each` and storing its offset.
fn poll_until(
    consumer: &BaseConsumer,
    mut each: impl FnMut(&[u8]),
    stop: impl Fn() -> bool,
) -> BoxResult<()> {
    while !stop() {
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(err)) => return Err(err.into()),
            Some(Ok(message)) => {
                each(message.payload().unwrap_or_default());
                consumer.store_offset_from_message(&message)?;
            }
        }
    }
    Ok(())
}

impl RawBroker for KafkaBench {
    fn name(&self) -> &'static str {
        "Kafka"
    }

    /// On nisshi a record reaches an idle consumer about half a
    /// `fetch.wait.max.ms` (100 ms here, ezmq's default) after it was
    /// stored: the broker re-reads its storage after half the wait.
    fn p99_goal(&self) -> Duration {
        Duration::from_millis(150)
    }

    /// A new consumer's group join: on nisshi the first records reach a
    /// listener (or the raw consumer) up to about a second after they
    /// were stored, which a 0.5 s warm-up left in the measured part (a
    /// p99 of 0.7 s on one side or the other).
    fn latency_join(&self) -> Duration {
        Duration::from_millis(2500)
    }

    fn raw_notes(&self) -> RawNotes {
        RawNotes {
            push_col: "raw rdkafka produce",
            consume_col: "raw poll+store loop",
            push: "one `rdkafka` FutureProducer shared by the tasks (idempotent, acks=all, \
                   linger 1 ms, as ezmq's), each send to ezmq's topic of the queue awaited for \
                   its delivery report.",
            consume: "one thread polling a `BaseConsumer` of a group of its own subscribed to \
                      the queue's topic, each record's offset stored for the auto-commit; \
                      timed until the last record.",
            latency: "the same consumer, latency taken when the record is polled.",
        }
    }

    async fn ezmq(&self) -> BoxResult<Client> {
        Ok(ezmq_kafka::connect_url(&self.url).await?)
    }

    async fn raw_sender(&self, queue: &str) -> BoxResult<Sender> {
        let (producer, topic) = (self.producer.clone(), self.topic(queue).await?);
        Ok(Arc::new(move |body: Bytes| {
            let (producer, topic) = (producer.clone(), topic.clone());
            Box::pin(async move {
                producer
                    .send(
                        FutureRecord::<(), [u8]>::to(&topic).payload(&body[..]),
                        Duration::from_secs(5),
                    )
                    .await
                    .map_err(|(err, _)| err)?;
                Ok(())
            })
        }))
    }

    async fn raw_consume(&self, queue: &str, n: u64, _k: usize) -> BoxResult<Duration> {
        let consumer = self.raw_consumer(&self.topic(queue).await?)?;
        tokio::task::spawn_blocking(move || {
            let start = Instant::now();
            let got = std::cell::Cell::new(0u64);
            poll_until(
                &consumer,
                |_| got.set(got.get() + 1),
                || got.get() >= n || start.elapsed() > super::DRAIN_LIMIT,
            )?;
            if got.get() < n {
                return Err(format!(
                    "raw consume: only {} of {n} in {:?}",
                    got.get(),
                    super::DRAIN_LIMIT
                )
                .into());
            }
            Ok(start.elapsed())
        })
        .await?
    }

    async fn raw_receiver(
        &self,
        queue: &str,
        _k: usize,
        rec: Arc<Recorder>,
        stop: Arc<AtomicBool>,
    ) -> BoxResult<JoinHandle<BoxResult<()>>> {
        let consumer = self.raw_consumer(&self.topic(queue).await?)?;
        Ok(tokio::task::spawn_blocking(move || {
            poll_until(
                &consumer,
                |payload| rec.record(payload),
                || stop.load(Ordering::Relaxed),
            )
        }))
    }

    async fn cleanup(&self, queue: &str) -> BoxResult<()> {
        let topic = self.topic(queue).await?;
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()?;
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(5)));
        admin.delete_topics(&[topic.as_str()], &options).await?;
        Ok(())
    }
}
