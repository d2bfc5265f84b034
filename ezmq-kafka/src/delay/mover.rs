//! The mover: a member of group `<prefix>.mover` over the delay levels in
//! every client that pushes delayed jobs or listens. It holds each record
//! until its level's due time, writes it to its next hop (a lower level,
//! or its destination once its run time has come), and commits a
//! partition's offsets up to its first record not yet written onward.
//! A partition is read at most [`READ_AHEAD`] ahead: the mover pauses it
//! while its newest record is due later.
//!
//! A mover that dies after a write and before its commit writes the
//! record again: a delayed job can run twice (at-least-once).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ezmq_core::{Error, Result, MESSAGE_ID_HEADER};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Header, Headers as _, Message, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use tokio::sync::watch;

use super::{next_hop, Hop, DEST_HEADER, LEVEL_DUE_HEADER, READ_AHEAD};
use crate::background::Background;
use crate::config::KafkaConfig;
use crate::consumer::member_config;
use crate::consumer::record::now_ms;
use ezmq_core::job_meta::RUN_AT_HEADER;

/// The longest the mover sleeps without looking at its records.
const IDLE_NAP: Duration = Duration::from_secs(1);

/// The most records one partition holds; it is paused beyond.
const MAX_HELD: usize = 10_000;

/// How long after a failed write the record is written again.
const RETRY_AFTER: u64 = 1000;

/// A level's partition: `(topic, partition)`.
type Key = (String, i32);

/// A record read from a level.
struct Held {
    due_ms: u64,
    run_at_ms: u64,
    dest: String,
    /// Its Kafka key (a keyed job's, for its order at the destination).
    key: Option<Vec<u8>>,
    body: Vec<u8>,
    /// Its Kafka headers but the level's due time.
    headers: Vec<(String, Vec<u8>)>,
}

impl Held {
    fn id(&self) -> &str {
        self.headers
            .iter()
            .find(|(k, _)| k == MESSAGE_ID_HEADER)
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
            .unwrap_or("")
    }
}

/// Where a record of a partition is.
enum Step {
    /// Waiting for its due time.
    Held(Held),
    /// Being written onward.
    Sending(Held),
    /// Written onward (or unreadable): its offset may be committed.
    Done,
}

/// The records of one assigned partition, by offset.
#[derive(Default)]
struct Partition {
    steps: BTreeMap<i64, Step>,
    paused: bool,
}

impl Partition {
    /// Drops the done records at the front; the offset to commit when
    /// any was dropped.
    fn advance(&mut self) -> Option<i64> {
        let mut past = None;
        while let Some(entry) = self.steps.first_entry() {
            if !matches!(entry.get(), Step::Done) {
                break;
            }
            past = Some(*entry.key() + 1);
            entry.remove();
        }
        past
    }

    /// The due time of its newest record still held or being written.
    fn newest_due(&self) -> Option<u64> {
        self.steps.values().next_back().and_then(|step| match step {
            Step::Held(held) | Step::Sending(held) => Some(held.due_ms),
            Step::Done => None,
        })
    }

    /// True when it should not be read further now.
    fn should_pause(&self, now: u64) -> bool {
        self.steps.len() >= MAX_HELD || self.newest_due().is_some_and(|due| due > ahead(now))
    }
}

fn ahead(now: u64) -> u64 {
    now.saturating_add(u64::try_from(READ_AHEAD.as_millis()).unwrap_or(u64::MAX))
}

/// What the mover's task and its rebalance callbacks share.
#[derive(Default)]
struct Moving {
    partitions: HashMap<Key, Partition>,
}

fn lock(state: &Mutex<Moving>) -> MutexGuard<'_, Moving> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The mover's consumer context: an assignment starts a partition
/// afresh, a revoke commits what was written onward and forgets the rest
/// (the next owner reads it again).
struct MoverContext {
    state: Arc<Mutex<Moving>>,
}

impl ClientContext for MoverContext {}

impl ConsumerContext for MoverContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(list) => {
                let mut state = lock(&self.state);
                for element in list.elements() {
                    let key = (element.topic().to_owned(), element.partition());
                    state.partitions.insert(key, Partition::default());
                }
            }
            Rebalance::Revoke(list) => {
                let mut commits = Vec::new();
                {
                    let mut state = lock(&self.state);
                    for element in list.elements() {
                        let key = (element.topic().to_owned(), element.partition());
                        if let Some(offset) = state
                            .partitions
                            .remove(&key)
                            .and_then(|mut partition| partition.advance())
                        {
                            commits.push((key, offset));
                        }
                    }
                }
                if !commits.is_empty() {
                    let list = offsets_list(&commits);
                    if let Err(err) = consumer
                        .store_offsets(&list)
                        .and_then(|()| consumer.commit(&list, CommitMode::Sync))
                    {
                        tracing::warn!(error = %err, "committing revoked delay-level partitions failed; their moved jobs may move again");
                    }
                }
            }
            Rebalance::Error(err) => {
                tracing::warn!(error = %err, "the delay mover's rebalance failed");
            }
        }
    }
}

fn offsets_list(commits: &[(Key, i64)]) -> TopicPartitionList {
    let mut list = TopicPartitionList::with_capacity(commits.len());
    for ((topic, partition), offset) in commits {
        // Cannot fail for an offset (only for a logical one).
        let _ = list
            .add_partition(topic, *partition)
            .set_offset(Offset::Offset(*offset));
    }
    list
}

fn partitions_list(keys: &[Key]) -> TopicPartitionList {
    let mut list = TopicPartitionList::with_capacity(keys.len());
    for (topic, partition) in keys {
        list.add_partition(topic, *partition);
    }
    list
}

/// The client's mover, owned by the backend: [`Mover::close`] ends and
/// joins its task.
pub(crate) struct Mover {
    task: Background,
}

impl std::fmt::Debug for Mover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mover").finish_non_exhaustive()
    }
}

impl Mover {
    /// Joins group `<prefix>.mover` over `levels` (the level topics, all
    /// created) and starts moving; writes go through `producer`.
    pub(crate) fn start(
        config: &KafkaConfig,
        producer: FutureProducer,
        levels: &[String],
    ) -> Result<Mover> {
        let state = Arc::new(Mutex::new(Moving::default()));
        let group = crate::names::name(&config.prefix, "mover", &[]);
        let consumer: StreamConsumer<MoverContext> = member_config(config, &group)
            .create_with_context(MoverContext {
                state: Arc::clone(&state),
            })
            .map_err(|err| setup("creating the delay mover", err))?;
        let topics: Vec<&str> = levels.iter().map(String::as_str).collect();
        consumer
            .subscribe(&topics)
            .map_err(|err| setup("joining the delay mover's group", err))?;
        let (prefix, timeout) = (config.prefix.clone(), config.command_timeout);
        let task = Background::spawn("delay mover", move |stopped| {
            run(consumer, state, producer, prefix, timeout, stopped)
        });
        tracing::debug!(group, "Kafka delay mover started");
        Ok(Mover { task })
    }

    /// Stops moving: waits for the writes under way, commits, leaves the
    /// group.
    pub(crate) async fn close(&self) {
        self.task.stop().await;
    }
}

fn setup(what: &str, err: KafkaError) -> Error {
    Error::backend(format!("{what} failed: {err}"), false)
}

/// A write onward finished: its partition, offset and success.
type Written = BoxFuture<'static, (Key, i64, bool)>;

async fn run(
    consumer: StreamConsumer<MoverContext>,
    state: Arc<Mutex<Moving>>,
    producer: FutureProducer,
    prefix: String,
    timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    let mut writes: FuturesUnordered<Written> = FuturesUnordered::new();
    loop {
        let now = now_ms();
        let wake = step(&consumer, &state, &producer, &prefix, now, &mut writes);
        let nap = wake
            .map_or(IDLE_NAP, |at| Duration::from_millis(at.saturating_sub(now)))
            .min(IDLE_NAP);
        tokio::select! {
            _ = stopped.changed() => break,
            Some((key, offset, ok)) = writes.next(), if !writes.is_empty() => {
                written(&consumer, &state, key, offset, ok);
            }
            message = consumer.recv() => match message {
                Ok(message) => hold(&state, &message),
                Err(err) => {
                    tracing::debug!(error = %err, "Kafka delay mover error");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            _ = tokio::time::sleep(nap) => {}
        }
    }
    // Closing: the writes under way finish (each within the producer's
    // delivery timeout), then what was written is committed.
    let _ = tokio::time::timeout(timeout, async {
        while let Some((key, offset, ok)) = writes.next().await {
            written(&consumer, &state, key, offset, ok);
        }
    })
    .await;
    let closed = tokio::task::spawn_blocking(move || {
        if let Err(err) = consumer.commit_consumer_state(CommitMode::Sync) {
            tracing::debug!(error = %err, "committing the delay mover's offsets at close failed");
        }
        consumer.unsubscribe();
        drop(consumer);
    })
    .await;
    if closed.is_err() {
        tracing::warn!("closing the Kafka delay mover failed");
    }
    tracing::debug!("Kafka delay mover closed");
}

/// Writes the due records onward, pauses and resumes partitions; the
/// next time something comes due.
fn step(
    consumer: &StreamConsumer<MoverContext>,
    state: &Mutex<Moving>,
    producer: &FutureProducer,
    prefix: &str,
    now: u64,
    writes: &mut FuturesUnordered<Written>,
) -> Option<u64> {
    let (mut pause, mut resume) = (Vec::new(), Vec::new());
    let mut wake: Option<u64> = None;
    {
        let mut state = lock(state);
        for (key, partition) in &mut state.partitions {
            for (offset, step) in &mut partition.steps {
                let Step::Held(held) = step else { continue };
                if held.due_ms > now {
                    wake = Some(wake.map_or(held.due_ms, |w| w.min(held.due_ms)));
                    continue;
                }
                match send(producer, prefix, held, now) {
                    Ok(delivery) => {
                        let (key, offset) = (key.clone(), *offset);
                        writes.push(
                            async move {
                                let ok = matches!(delivery.await, Ok(Ok(_)));
                                (key, offset, ok)
                            }
                            .boxed(),
                        );
                        if let Step::Held(held) = std::mem::replace(step, Step::Done) {
                            *step = Step::Sending(held);
                        }
                    }
                    Err(err) => {
                        tracing::debug!(topic = %held.dest, message_id = held.id(), error = %err, "writing a delayed job onward failed; trying again");
                        held.due_ms = now + RETRY_AFTER;
                    }
                }
            }
            let should_pause = partition.should_pause(now);
            if should_pause && !partition.paused {
                partition.paused = true;
                pause.push(key.clone());
            } else if !should_pause && partition.paused {
                partition.paused = false;
                resume.push(key.clone());
            }
            if partition.paused {
                // Read again once the newest record is within reach.
                if let Some(due) = partition.newest_due() {
                    let at = due.saturating_sub(ahead(0));
                    wake = Some(wake.map_or(at, |w| w.min(at)));
                }
            }
        }
    }
    if !pause.is_empty() {
        if let Err(err) = consumer.pause(&partitions_list(&pause)) {
            tracing::debug!(error = %err, "pausing delay-level partitions failed");
        }
    }
    if !resume.is_empty() {
        if let Err(err) = consumer.resume(&partitions_list(&resume)) {
            tracing::debug!(error = %err, "resuming delay-level partitions failed");
        }
    }
    wake
}

/// Writes `held` to its next hop.
fn send(
    producer: &FutureProducer,
    prefix: &str,
    held: &Held,
    now: u64,
) -> std::result::Result<DeliveryFuture, KafkaError> {
    let hop = next_hop(prefix, held.run_at_ms, now);
    let (topic, due) = match &hop {
        Hop::Destination => (held.dest.as_str(), None),
        Hop::Level { topic, due_ms } => (topic.as_str(), Some(due_ms.to_string())),
    };
    let mut headers = OwnedHeaders::new_with_capacity(held.headers.len() + 1);
    for (key, value) in &held.headers {
        if due.is_none() && key == DEST_HEADER {
            continue;
        }
        headers = headers.insert(Header {
            key,
            value: Some(value.as_slice()),
        });
    }
    if let Some(due) = &due {
        headers = headers.insert(Header {
            key: LEVEL_DUE_HEADER,
            value: Some(due.as_str()),
        });
    }
    let mut record = FutureRecord::<[u8], [u8]>::to(topic)
        .payload(&held.body)
        .headers(headers);
    if let Some(key) = &held.key {
        record = record.key(key.as_slice());
    }
    producer.send_result(record).map_err(|(err, _)| err)
}

/// Takes a record read from a level (unless its partition is no longer
/// this member's).
fn hold(state: &Mutex<Moving>, message: &BorrowedMessage<'_>) {
    let key = (message.topic().to_owned(), message.partition());
    let offset = message.offset();
    let mut headers = Vec::new();
    let (mut dest, mut due_ms, mut run_at_ms) = (None, None, None);
    if let Some(kafka_headers) = message.headers() {
        for header in kafka_headers.iter() {
            let value = header.value.unwrap_or_default();
            let text = || std::str::from_utf8(value).ok();
            match header.key {
                LEVEL_DUE_HEADER => {
                    due_ms = text().and_then(|t| t.parse().ok());
                    continue;
                }
                DEST_HEADER => dest = text().map(str::to_owned),
                RUN_AT_HEADER => run_at_ms = text().and_then(|t| t.parse().ok()),
                _ => {}
            }
            headers.push((header.key.to_owned(), value.to_vec()));
        }
    }
    let mut state = lock(state);
    let Some(partition) = state.partitions.get_mut(&key) else {
        return;
    };
    let step = match (dest, due_ms) {
        (Some(dest), Some(due_ms)) => Step::Held(Held {
            due_ms,
            run_at_ms: run_at_ms.unwrap_or(due_ms),
            dest,
            key: message.key().map(<[u8]>::to_vec),
            body: message.payload().unwrap_or_default().to_vec(),
            headers,
        }),
        _ => {
            tracing::warn!(topic = %key.0, partition = key.1, offset, "a record in a delay level without ezmq's destination and due time; skipped");
            Step::Done
        }
    };
    partition.steps.insert(offset, step);
}

/// A write onward ended: done, or held again for another try.
fn written(
    consumer: &StreamConsumer<MoverContext>,
    state: &Mutex<Moving>,
    key: Key,
    offset: i64,
    ok: bool,
) {
    let commit = {
        let mut state = lock(state);
        let Some(partition) = state.partitions.get_mut(&key) else {
            return;
        };
        let Some(step) = partition.steps.get_mut(&offset) else {
            return;
        };
        if ok {
            if let Step::Sending(held) = step {
                tracing::trace!(topic = %held.dest, message_id = held.id(), "delayed job moved");
            }
            *step = Step::Done;
            partition.advance()
        } else {
            if let Step::Sending(held) = std::mem::replace(step, Step::Done) {
                tracing::debug!(topic = %held.dest, message_id = held.id(), "writing a delayed job onward failed; trying again");
                let mut held = held;
                held.due_ms = now_ms() + RETRY_AFTER;
                *step = Step::Held(held);
            }
            None
        }
    };
    if let Some(offset) = commit {
        if let Err(err) = consumer.store_offsets(&offsets_list(&[(key, offset)])) {
            tracing::debug!(error = %err, "storing a delay level's offset failed");
        }
    }
}
