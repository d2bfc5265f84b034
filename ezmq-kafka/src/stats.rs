//! Queue length (the group's lag) and peek (an assigned read from the
//! committed offsets that commits nothing), each through a short-lived
//! consumer that carries the group's id and never joins it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ezmq_core::{Error, Job, Result, Topic};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::cluster::kafka_error;
use crate::config::KafkaConfig;
use crate::consumer::record::{now_ms, Record};

/// A consumer with `group`'s id that never subscribes: it reads the
/// group's committed offsets and the partitions' watermarks.
fn observer(config: &KafkaConfig, group: &str) -> Result<BaseConsumer> {
    ClientConfig::new()
        .set("bootstrap.servers", config.brokers().join(","))
        .set("client.id", "ezmq-observer")
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("allow.auto.create.topics", "false")
        .set("fetch.wait.max.ms", "20")
        .create()
        .map_err(|err| Error::backend(format!("creating a Kafka observer failed: {err}"), false))
}

/// Each partition of `topic` with the group's committed offset on it.
fn committed(
    consumer: &BaseConsumer,
    topic: &str,
    timeout: Duration,
) -> Result<Vec<(i32, Option<i64>)>> {
    let metadata = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(|err| kafka_error("metadata", err))?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Err(Error::backend(
            format!("Kafka topic {topic:?} has no partitions (not created?)"),
            true,
        ));
    }
    let mut list = TopicPartitionList::with_capacity(partitions.len());
    for &p in &partitions {
        list.add_partition(topic, p);
    }
    let committed = consumer
        .committed_offsets(list, timeout)
        .map_err(|err| kafka_error("committed offsets", err))?;
    let committed: HashMap<i32, Offset> = committed
        .elements()
        .iter()
        .map(|e| (e.partition(), e.offset()))
        .collect();
    Ok(partitions
        .into_iter()
        .map(|p| match committed.get(&p) {
            Some(Offset::Offset(offset)) => (p, Some(*offset)),
            _ => (p, None),
        })
        .collect())
}

/// Each partition's (start, committed-or-start, end) offsets.
fn positions(
    consumer: &BaseConsumer,
    topic: &str,
    timeout: Duration,
) -> Result<Vec<(i32, i64, i64)>> {
    let mut out = Vec::new();
    for (p, committed) in committed(consumer, topic, timeout)? {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, timeout)
            .map_err(|err| kafka_error("watermarks", err))?;
        out.push((p, committed.map_or(low, |c| c.clamp(low, high)), high));
    }
    Ok(out)
}

/// True when `group` has committed an offset on some partition of
/// `kafka_topic`.
pub(crate) async fn group_has_offsets(
    config: &KafkaConfig,
    kafka_topic: &str,
    group: &str,
) -> Result<bool> {
    let (config, kafka_topic, group) = (config.clone(), kafka_topic.to_owned(), group.to_owned());
    blocking(move || {
        let consumer = observer(&config, &group)?;
        Ok(committed(&consumer, &kafka_topic, config.command_timeout)?
            .iter()
            .any(|(_, c)| c.is_some()))
    })
    .await
}

/// Commits `kafka_topic`'s end offsets for `group` unless it has
/// committed offsets already, so a new group gets what is published from
/// now on. The group has no member yet: a commit from outside it.
pub(crate) async fn start_group_at_end(
    config: &KafkaConfig,
    kafka_topic: &str,
    group: &str,
) -> Result<()> {
    let (config, kafka_topic, group) = (config.clone(), kafka_topic.to_owned(), group.to_owned());
    blocking(move || {
        let consumer = observer(&config, &group)?;
        let timeout = config.command_timeout;
        let partitions = committed(&consumer, &kafka_topic, timeout)?;
        if partitions.iter().any(|(_, c)| c.is_some()) {
            return Ok(());
        }
        let mut list = TopicPartitionList::with_capacity(partitions.len());
        for (p, _) in partitions {
            let (_, high) = consumer
                .fetch_watermarks(&kafka_topic, p, timeout)
                .map_err(|err| kafka_error("watermarks", err))?;
            list.add_partition_offset(&kafka_topic, p, Offset::Offset(high))
                .map_err(|err| kafka_error("start group", err))?;
        }
        consumer
            .commit(&list, CommitMode::Sync)
            .map_err(|err| kafka_error("start group", err))
    })
    .await
}

/// Records of `topic` not committed by its group: waiting ones, and the
/// ones handed out and not committed yet.
pub(crate) async fn queue_len(config: &KafkaConfig, kafka_topic: String) -> Result<u64> {
    let config = config.clone();
    blocking(move || {
        let consumer = observer(&config, &kafka_topic)?;
        let lag = positions(&consumer, &kafka_topic, config.command_timeout)?
            .into_iter()
            .map(|(_, from, high)| u64::try_from(high - from).unwrap_or(0))
            .sum();
        Ok(lag)
    })
    .await
}

/// Up to `n` records from each partition's committed offset, merged by
/// timestamp, oldest first; nothing is committed.
pub(crate) async fn peek(
    config: &KafkaConfig,
    topic: Topic,
    kafka_topic: String,
    n: usize,
) -> Result<Vec<Job>> {
    let config = config.clone();
    blocking(move || {
        let consumer = observer(&config, &kafka_topic)?;
        let positions = positions(&consumer, &kafka_topic, config.command_timeout)?;
        let mut list = TopicPartitionList::new();
        let mut ends = HashMap::new();
        for &(p, from, high) in &positions {
            if from < high {
                list.add_partition_offset(&kafka_topic, p, Offset::Offset(from))
                    .map_err(|err| kafka_error("assign", err))?;
                ends.insert(p, (high, 0usize));
            }
        }
        if ends.is_empty() || n == 0 {
            return Ok(Vec::new());
        }
        consumer
            .assign(&list)
            .map_err(|err| kafka_error("assign", err))?;
        let deadline = Instant::now() + config.command_timeout;
        let mut found: Vec<(i64, Record)> = Vec::new();
        let now = now_ms();
        while !ends.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::backend(
                    format!("peeking Kafka topic {kafka_topic:?} timed out"),
                    true,
                ));
            }
            match consumer.poll(left.min(Duration::from_millis(200))) {
                None => {}
                Some(Err(err)) => return Err(kafka_error("peek", err)),
                Some(Ok(message)) => {
                    let p = message.partition();
                    let Some((high, taken)) = ends.get_mut(&p) else {
                        continue;
                    };
                    let record = Record::of(&message, 0);
                    if !record.expired(now) {
                        let at = message.timestamp().to_millis().unwrap_or(0);
                        found.push((at, record));
                        *taken += 1;
                    }
                    if message.offset() + 1 >= *high || *taken >= n {
                        ends.remove(&p);
                    }
                }
            }
        }
        found.sort_by(|(a, ra), (b, rb)| a.cmp(b).then_with(|| ra.id.as_str().cmp(rb.id.as_str())));
        Ok(found
            .into_iter()
            .take(n)
            .map(|(_, r)| {
                Job::new(r.id, topic.clone(), r.body)
                    .with_headers(r.headers)
                    .with_attempt(r.attempt)
            })
            .collect())
    })
    .await
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| Error::backend(format!("a Kafka inspection task failed: {err}"), false))?
}
