//! Exclusive claims on Kafka, which has no conditional write: the claim
//! log. Every claim and release is a record of one single-partition topic
//! (`<prefix>.claims`, `LogAppendTime`); every client's reader applies
//! the records in offset order with one rule ([`rule`]) at each record's
//! append time, so all readers agree on every record's outcome, and a
//! caller returns the outcome its own reader gave its record. Nothing
//! elects a leader or holds a lock: a killed client's record is in the
//! log or not, and a record that won keeps its key until its hold ends,
//! as on every backend.
//!
//! A starting client replays the log from its start (its retention, 7
//! days by default); checkpoints that bound the replay are not built yet.

mod reader;
mod rule;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ezmq_core::spi::ClaimOutcome;
use ezmq_core::{Error, Result, Topic};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::{oneshot, watch};

use self::reader::{lock, LogState};
use self::rule::{Applied, Op};
use crate::background::Background;
use crate::cluster::{kafka_error, KafkaCluster};
use crate::config::KafkaConfig;
use crate::consumer::record::now_ms;

/// The Kafka headers of a claim-log record (its key is the claim's).
pub(crate) const OP_HEADER: &str = "ezmq-claim-op";
pub(crate) const TOKEN_HEADER: &str = "ezmq-claim-token";
pub(crate) const HOLD_HEADER: &str = "ezmq-claim-hold";
pub(crate) const REQ_HEADER: &str = "ezmq-claim-req";

/// The reader's fetch wait: a claim's outcome is read this long after
/// its record was stored at most (the latency of claims).
const CLAIM_FETCH_WAIT: &str = "20";

/// The client's claim log: its producer, its reader and what it applied.
pub(crate) struct ClaimLog {
    topic: String,
    producer: FutureProducer,
    state: Arc<Mutex<LogState>>,
    /// The offset of the next record the reader applies.
    applied: watch::Receiver<i64>,
    /// Reads the log's end for [`ClaimLog::holder`].
    observer: Arc<BaseConsumer>,
    timeout: Duration,
    reader: Background,
}

impl std::fmt::Debug for ClaimLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimLog")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

/// The settings of a consumer assigned its partitions (the claims reader,
/// a reply inbox): it joins no group and commits nothing.
pub(crate) fn reader_config(config: &KafkaConfig, group: &str) -> ClientConfig {
    let mut reader = ClientConfig::new();
    reader
        .set("bootstrap.servers", config.brokers().join(","))
        .set("client.id", "ezmq-claims")
        // Never joined nor committed to: librdkafka wants an id anyway.
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("allow.auto.create.topics", "false")
        .set("fetch.wait.max.ms", CLAIM_FETCH_WAIT)
        .set("reconnect.backoff.max.ms", "1000");
    reader
}

fn setup(what: &str, err: rdkafka::error::KafkaError) -> Error {
    Error::backend(format!("{what} failed: {err}"), false)
}

impl ClaimLog {
    /// Creates the log's topic unless it exists, and starts reading it
    /// from its start.
    pub(crate) async fn start(cluster: &KafkaCluster, producer: FutureProducer) -> Result<Self> {
        let config = cluster.config();
        let topic = crate::names::name(&config.prefix, "claims", &[]);
        cluster
            .ensure_topic(&topic, 1, &[("message.timestamp.type", "LogAppendTime")])
            .await?;
        let group = crate::names::name(&config.prefix, "claims-reader", &[]);
        let observer: Arc<BaseConsumer> = Arc::new(
            reader_config(config, &group)
                .create()
                .map_err(|err| setup("creating the Kafka claims reader", err))?,
        );
        let timeout = config.command_timeout;
        let (low, _) = watermarks(&observer, &topic, timeout).await?;
        let consumer: StreamConsumer = reader_config(config, &group)
            .create()
            .map_err(|err| setup("creating the Kafka claims reader", err))?;
        let mut list = TopicPartitionList::with_capacity(1);
        list.add_partition_offset(&topic, 0, Offset::Offset(low))
            .map_err(|err| setup("assigning the claim log", err))?;
        consumer
            .assign(&list)
            .map_err(|err| setup("assigning the claim log", err))?;
        let state = Arc::new(Mutex::new(LogState::default()));
        let (applied_tx, applied) = watch::channel(low);
        let reader = Background::spawn("claims reader", {
            let state = Arc::clone(&state);
            move |stopped| reader::run(consumer, state, applied_tx, stopped)
        });
        tracing::debug!(topic, from = low, "Kafka claim log read");
        Ok(ClaimLog {
            topic,
            producer,
            state,
            applied,
            observer,
            timeout,
            reader,
        })
    }

    /// Takes `key` for `hold` under `token` unless it is held.
    pub(crate) async fn claim(
        &self,
        key: &Topic,
        token: &str,
        hold: Duration,
    ) -> Result<ClaimOutcome> {
        let hold_ms = u64::try_from(hold.as_millis()).unwrap_or(u64::MAX);
        let op = Op::Claim {
            token: token.to_owned(),
            hold_ms,
        };
        match self.append(key, &op).await {
            Ok(Applied::Won) => Ok(ClaimOutcome::Won),
            Ok(Applied::Held(holder)) => Ok(ClaimOutcome::Held(Some(holder))),
            Ok(Applied::Released(_)) => Ok(ClaimOutcome::Held(None)),
            Err(err) => {
                // The record may land later, held by nobody alive: a
                // release after it gives it back.
                if err.is_outcome_unknown() {
                    let release = Op::Release {
                        token: token.to_owned(),
                    };
                    let _ = self.send(key, &release, "");
                }
                Err(err)
            }
        }
    }

    /// Gives `key` back if `token` holds it.
    pub(crate) async fn release(&self, key: &Topic, token: &str) -> Result<bool> {
        let op = Op::Release {
            token: token.to_owned(),
        };
        Ok(matches!(
            self.append(key, &op).await?,
            Applied::Released(true)
        ))
    }

    /// The token holding `key`, once the reader applied every record the
    /// log held when the call started.
    pub(crate) async fn holder(&self, key: &Topic) -> Result<Option<String>> {
        let (_, end) = watermarks(&self.observer, &self.topic, self.timeout).await?;
        let mut applied = self.applied.clone();
        match tokio::time::timeout(self.timeout, applied.wait_for(|at| *at >= end)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Err(Error::Shutdown),
            Err(_) => return Err(self.no_outcome(key)),
        }
        Ok(lock(&self.state)
            .claims
            .holder(key.as_str(), now_ms())
            .map(str::to_owned))
    }

    /// Appends `op` and waits for its outcome as the reader applies it.
    async fn append(&self, key: &Topic, op: &Op) -> Result<Applied> {
        let req = uuid::Uuid::new_v4().simple().to_string();
        let (tx, rx) = oneshot::channel();
        lock(&self.state).waiting.insert(req.clone(), tx);
        let stored = match self.send(key, op, &req) {
            Ok(delivery) => match delivery.await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err((err, _))) => Err(crate::push::not_stored(key, err)),
                Err(_) => Err(Error::Shutdown),
            },
            Err(err) => Err(crate::push::not_stored(key, err)),
        };
        let outcome = match stored {
            Ok(()) => match tokio::time::timeout(self.timeout, rx).await {
                Ok(Ok(applied)) => Ok(applied),
                Ok(Err(_)) => Err(Error::Shutdown),
                Err(_) => Err(self.no_outcome(key)),
            },
            Err(err) => Err(err),
        };
        if outcome.is_err() {
            lock(&self.state).waiting.remove(&req);
        }
        outcome
    }

    /// Starts the produce of one record.
    fn send(
        &self,
        key: &Topic,
        op: &Op,
        req: &str,
    ) -> std::result::Result<rdkafka::producer::DeliveryFuture, rdkafka::error::KafkaError> {
        let (name, token, hold) = match op {
            Op::Claim { token, hold_ms } => ("claim", token, Some(hold_ms.to_string())),
            Op::Release { token } => ("release", token, None),
        };
        let mut headers = OwnedHeaders::new_with_capacity(4)
            .insert(Header {
                key: OP_HEADER,
                value: Some(name),
            })
            .insert(Header {
                key: TOKEN_HEADER,
                value: Some(token.as_str()),
            })
            .insert(Header {
                key: REQ_HEADER,
                value: Some(req),
            });
        if let Some(hold) = &hold {
            headers = headers.insert(Header {
                key: HOLD_HEADER,
                value: Some(hold.as_str()),
            });
        }
        let record = FutureRecord::<str, [u8]>::to(&self.topic)
            .key(key.as_str())
            .headers(headers);
        self.producer.send_result(record).map_err(|(err, _)| err)
    }

    fn no_outcome(&self, key: &Topic) -> Error {
        Error::NoReply {
            topic: key.to_string(),
            after: self.timeout,
        }
    }

    /// Stops the reader and waits for it.
    pub(crate) async fn close(&self) {
        self.reader.stop().await;
    }
}

/// The log's (start, end) offsets.
async fn watermarks(
    observer: &Arc<BaseConsumer>,
    topic: &str,
    timeout: Duration,
) -> Result<(i64, i64)> {
    let observer = Arc::clone(observer);
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || observer.fetch_watermarks(&topic, 0, timeout))
        .await
        .map_err(|err| Error::backend(format!("reading the claim log's end: {err}"), true))?
        .map_err(|err| kafka_error("claim log watermarks", err))
}
