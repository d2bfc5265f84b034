//! The consumer thread: joins and leaves the group as the listener
//! wants, polls records into the buffer, stores the committable offsets,
//! pauses fetching when the buffer is full, and settles rebalances (a
//! partition leaves only after its running jobs settled, or the grace
//! ran out).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ezmq_core::{Error, Result};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::offsets::Replay;
use super::record::Record;
use super::state::Commit;
use super::Shared;
use crate::config::KafkaConfig;

/// The consumer's context: rebalances update the shared state.
pub(crate) struct MemberContext {
    shared: Arc<Shared>,
    grace: Duration,
    window: u32,
    /// The limit of the committed-offsets read at an assignment.
    timeout: Duration,
}

impl ClientContext for MemberContext {}

impl ConsumerContext for MemberContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let topic = &self.shared.topic;
        match rebalance {
            Rebalance::Assign(list) => {
                let partitions = self.replays(consumer, list);
                tracing::debug!(topic = %topic, ?partitions, "Kafka partitions assigned");
                self.shared.lock().assigned(&partitions);
            }
            Rebalance::Revoke(list) => {
                let partitions = partitions_of(list);
                if consumer.assignment_lost() {
                    tracing::warn!(topic = %topic, ?partitions, "Kafka partitions lost (this member was fenced); their running jobs may run again elsewhere");
                    let mut state = self.shared.lock();
                    state.revoked(&partitions);
                    return;
                }
                let commits = self.settle_revoked(&partitions);
                if !commits.is_empty() {
                    let list = offsets_list(&self.shared.kafka_topic, &commits);
                    let stored = consumer
                        .store_offsets(&list)
                        .and_then(|()| consumer.commit(&list, CommitMode::Sync));
                    if let Err(err) = stored {
                        tracing::warn!(topic = %topic, error = %err, "committing revoked Kafka partitions failed; their finished jobs may run again");
                    }
                }
                tracing::debug!(topic = %topic, ?partitions, "Kafka partitions revoked");
            }
            Rebalance::Error(err) => {
                tracing::warn!(topic = %topic, error = %err, "Kafka rebalance failed");
            }
        }
    }
}

impl MemberContext {
    /// The assigned partitions, each with what its last commit's
    /// metadata says about the records past it (read from the group's
    /// committed offsets; none when that read fails).
    fn replays(
        &self,
        consumer: &BaseConsumer<Self>,
        list: &TopicPartitionList,
    ) -> Vec<(i32, Option<Replay>)> {
        let committed = consumer
            .committed_offsets(list.clone(), self.timeout)
            .map_err(|err| {
                tracing::debug!(topic = %self.shared.topic, error = %err, "reading the committed offsets failed; attempts after a move are not counted");
            })
            .ok();
        partitions_of(list)
            .into_iter()
            .map(|partition| {
                let replay = committed.as_ref().and_then(|committed| {
                    let element = committed.find_partition(&self.shared.kafka_topic, partition)?;
                    match element.offset() {
                        Offset::Offset(offset) => Replay::parse(offset, element.metadata()),
                        _ => None,
                    }
                });
                (partition, replay)
            })
            .collect()
    }

    /// Waits (up to the grace) for the running jobs of `partitions`,
    /// unless closing; drops their buffered records; the offsets to
    /// commit.
    fn settle_revoked(&self, partitions: &[i32]) -> Vec<Commit> {
        let deadline = Instant::now() + self.grace;
        let mut state = self.shared.lock();
        loop {
            let running = state.running(Some(partitions));
            if running == 0 || self.shared.closing.load(Ordering::Acquire) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!(topic = %self.shared.topic, running, ?partitions, "jobs still run as their partitions move to another process; they may run twice");
                break;
            }
            state = self
                .shared
                .settled
                .wait_timeout(state, left.min(Duration::from_millis(200)))
                .map_or_else(|poisoned| poisoned.into_inner().0, |(state, _)| state);
        }
        state.revoked(partitions)
    }
}

fn partitions_of(list: &TopicPartitionList) -> Vec<i32> {
    list.elements().iter().map(|e| e.partition()).collect()
}

fn offsets_list(topic: &str, commits: &[Commit]) -> TopicPartitionList {
    let mut list = TopicPartitionList::with_capacity(commits.len());
    for (partition, offset, metadata) in commits {
        let mut element = list.add_partition(topic, *partition);
        // Cannot fail for an offset (only for a logical one).
        let _ = element.set_offset(Offset::Offset(*offset));
        element.set_metadata(metadata.as_str());
    }
    list
}

fn partition_list(topic: &str, partitions: &[i32]) -> TopicPartitionList {
    let mut list = TopicPartitionList::with_capacity(partitions.len());
    for &partition in partitions {
        list.add_partition(topic, partition);
    }
    list
}

fn millis(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

/// The group member of `shared`'s topic, not subscribed yet.
pub(crate) fn create(
    config: &KafkaConfig,
    shared: &Arc<Shared>,
) -> Result<BaseConsumer<MemberContext>> {
    let context = MemberContext {
        shared: Arc::clone(shared),
        grace: config.rebalance_grace,
        window: config.max_uncommitted,
        timeout: config.command_timeout,
    };
    member_config(config, &shared.group)
        .create_with_context(context)
        .map_err(|err| kafka_setup(&shared.kafka_topic, err))
}

/// The settings of a member of consumer group `group` (a listener's or
/// the delay mover's): offsets stored by ezmq and committed every
/// `commit_interval`, cooperative-sticky assignment, the session and
/// fetch wait of `config`.
pub(crate) fn member_config(config: &KafkaConfig, group: &str) -> ClientConfig {
    let mut member = ClientConfig::new();
    member
        .set("bootstrap.servers", config.brokers().join(","))
        .set("client.id", "ezmq")
        .set("group.id", group)
        .set("group.protocol", "classic")
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("enable.auto.commit", "true")
        .set("enable.auto.offset.store", "false")
        .set("auto.commit.interval.ms", millis(config.commit_interval))
        .set("auto.offset.reset", "earliest")
        .set("allow.auto.create.topics", "false")
        .set("session.timeout.ms", millis(config.session_timeout))
        .set("heartbeat.interval.ms", millis(config.session_timeout / 4))
        .set("fetch.wait.max.ms", millis(config.fetch_wait))
        // librdkafka fetches ahead up to 16 MiB (its default record count,
        // 100,000, kept: a shallower prefetch cut the consume rate on the
        // test broker by two thirds, as each fetch brings little).
        .set("queued.max.messages.kbytes", "16384")
        // A broker back from a restart is found within a second.
        .set("reconnect.backoff.max.ms", "1000")
        .set(
            "socket.connection.setup.timeout.ms",
            millis(config.connect_timeout),
        );
    member
}

fn kafka_setup(topic: &str, err: KafkaError) -> Error {
    Error::backend(
        format!("creating the Kafka consumer of {topic:?} failed: {err}"),
        false,
    )
}

/// The thread's loop, until [`Shared::stop`]; then it commits and
/// leaves the group (dropping the consumer closes it).
pub(crate) fn run(consumer: BaseConsumer<MemberContext>, shared: &Shared, poll_wait: Duration) {
    let topic = shared.kafka_topic.as_str();
    let window = consumer.context().window;
    let mut subscribed = false;
    while !shared.stop.load(Ordering::Acquire) {
        let (wanted, running, store, flow, full) = {
            let mut state = shared.lock();
            let flow = state.flow(window);
            (
                state.wanted,
                state.running(None),
                state.take_unstored(),
                flow,
                state.full(),
            )
        };
        if wanted && !subscribed {
            match consumer.subscribe(&[topic]) {
                Ok(()) => subscribed = true,
                Err(err) => {
                    shared.lock().failure =
                        Some(format!("joining Kafka group {topic:?} failed: {err}"));
                    shared.notify_arrived();
                    std::thread::sleep(Duration::from_millis(500));
                    continue;
                }
            }
        } else if !wanted && subscribed && running == 0 {
            // Paused: leave, so the group's other members take the
            // partitions (the revoke commits what is finished).
            consumer.unsubscribe();
            subscribed = false;
        }
        if !store.is_empty() {
            if let Err(err) = consumer.store_offsets(&offsets_list(topic, &store)) {
                tracing::debug!(topic, error = %err, "storing Kafka offsets failed");
            }
        }
        if !flow.pause.is_empty() {
            let _ = consumer.pause(&partition_list(topic, &flow.pause));
        }
        if !flow.resume.is_empty() {
            let _ = consumer.resume(&partition_list(topic, &flow.resume));
        }
        if full {
            // The listener is behind: librdkafka keeps what it fetched
            // ahead; one poll a second serves the group (heartbeats run
            // on librdkafka's threads, rebalances on this poll).
            let deadline = Instant::now() + FULL_POLL_EVERY;
            let mut state = shared.lock();
            while state.full() && !shared.stop.load(Ordering::Acquire) {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                state = shared
                    .settled
                    .wait_timeout(state, left)
                    .map_or_else(|poisoned| poisoned.into_inner().0, |(state, _)| state);
            }
            drop(state);
            poll_some(&consumer, shared, Duration::ZERO, 1);
        } else {
            poll_some(&consumer, shared, poll_wait, 256);
        }
    }
    // Closing: store what finished, commit it, leave (the drop closes
    // the consumer; its revoke does not wait for running jobs).
    let store = shared.lock().take_unstored();
    if !store.is_empty() {
        let list = offsets_list(topic, &store);
        if let Err(err) = consumer
            .store_offsets(&list)
            .and_then(|()| consumer.commit(&list, CommitMode::Sync))
        {
            tracing::debug!(topic, error = %err, "committing Kafka offsets at close failed");
        }
    }
    if subscribed {
        consumer.unsubscribe();
    }
    drop(consumer);
    shared.lock().clear();
    tracing::debug!(topic, "Kafka consumer closed");
}

/// How often a full buffer is polled anyway.
const FULL_POLL_EVERY: Duration = Duration::from_secs(1);

/// One poll (waiting up to `wait`), then what else is there at once, up
/// to `most` records; wakes the receives when records came.
fn poll_some(consumer: &BaseConsumer<MemberContext>, shared: &Shared, wait: Duration, most: usize) {
    let mut came = 0;
    let mut timeout = wait;
    while came < most {
        match consumer.poll(timeout) {
            None => break,
            Some(Ok(message)) => {
                let mut state = shared.lock();
                if let Some(generation) = state.generation_of(rdkafka::Message::partition(&message))
                {
                    state.add(Record::of(&message, generation));
                    came += 1;
                }
            }
            Some(Err(err)) => {
                tracing::debug!(topic = %shared.topic, error = %err, "Kafka consumer error");
                break;
            }
        }
        timeout = Duration::ZERO;
    }
    if came > 0 {
        shared.notify_arrived();
    }
}
