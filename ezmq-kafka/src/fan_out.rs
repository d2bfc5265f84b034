//! Broadcast groups: a broadcast topic `<prefix>.b.<topic>` that every
//! group reads with a consumer group of its own, `<prefix>.g.<topic>.<group>`,
//! whose members share its partitions like a queue's listeners (retries
//! and releases run in place, as in a queue). A new group starts at the
//! topic's end as it is joined: the first joiner, under a claim, commits
//! the current end offsets for the group, so the group gets what is
//! published from then on, and a group that existed keeps its place.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{ClaimOutcome, ExclusiveClaim, FanOut, GroupMembership};
use ezmq_core::{Error, PushOptions, Result, Topic};

use crate::backend::KafkaBackend;

/// The Kafka topic broadcasts of `topic` go to.
pub(crate) fn broadcast_topic(prefix: &str, topic: &Topic) -> String {
    crate::names::name(prefix, "b", &[topic.as_str()])
}

/// The consumer group of broadcast group `group` on `topic`.
pub(crate) fn group_id(prefix: &str, topic: &Topic, group: &Topic) -> String {
    crate::names::name(prefix, "g", &[topic.as_str(), group.as_str()])
}

/// How long a joiner holds the claim under which it starts a new group.
const INIT_HOLD: Duration = Duration::from_secs(60);

impl KafkaBackend {
    /// `topic`'s broadcast topic, created first when this client has not
    /// seen it.
    async fn ensure_broadcast_topic(&self, topic: &Topic) -> Result<String> {
        self.ensure_open()?;
        let config = self.config();
        let kafka_topic = broadcast_topic(&config.prefix, topic);
        self.cluster()
            .ensure_topic(&kafka_topic, config.partitions, &[])
            .await?;
        Ok(kafka_topic)
    }

    /// Makes sure group `group_id` has a place on `kafka_topic`: the first
    /// joiner (under claim `group-init|<group id>`) commits the topic's end
    /// offsets when the group has none; the others wait until it did.
    async fn start_group(&self, kafka_topic: &str, group_id: &str) -> Result<()> {
        let key = Topic::internal("group-init", &[group_id])?;
        let token = uuid::Uuid::new_v4().simple().to_string();
        let config = self.config();
        let deadline = tokio::time::Instant::now() + config.command_timeout * 3;
        loop {
            match self.claim(&key, &token, INIT_HOLD).await? {
                ClaimOutcome::Won => {
                    let started =
                        crate::stats::start_group_at_end(config, kafka_topic, group_id).await;
                    let _ = self.release(&key, &token).await;
                    return started;
                }
                ClaimOutcome::Held(_) => {
                    if crate::stats::group_has_offsets(config, kafka_topic, group_id).await? {
                        return Ok(());
                    }
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::backend(
                    format!("Kafka group {group_id:?} was not started by the client starting it"),
                    true,
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[async_trait]
impl FanOut for KafkaBackend {
    /// One record to the broadcast topic (through the delay levels when
    /// delayed); Kafka does not tell how many groups read it: `None`.
    async fn publish_to_groups(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<Option<usize>> {
        let kafka_topic = self.ensure_broadcast_topic(topic).await?;
        match options.delay.filter(|d| !d.is_zero()) {
            Some(delay) => {
                self.publish_delayed(topic, kafka_topic, body, options, delay)
                    .await?;
            }
            None => {
                crate::push::publish(self.producer(), &kafka_topic, topic, &body, options).await?;
            }
        }
        Ok(None)
    }

    async fn join_group(
        &self,
        topic: &Topic,
        group: &Topic,
        _retention: Duration,
    ) -> Result<Box<dyn GroupMembership>> {
        let kafka_topic = self.ensure_broadcast_topic(topic).await?;
        let id = group_id(&self.config().prefix, topic, group);
        self.start_group(&kafka_topic, &id).await?;
        tracing::debug!(topic = %topic, group = %group, group_id = %id, "joined a Kafka broadcast group");
        Ok(Box::new(KafkaMembership))
    }
}

/// A member's place in a broadcast group: the consumer group keeps it
/// while the listener runs; Kafka forgets an empty group's offsets after
/// its `offsets.retention.minutes` (7 days by default), after which a
/// returning group starts at the end again.
#[derive(Debug)]
struct KafkaMembership;

#[async_trait]
impl GroupMembership for KafkaMembership {
    async fn refresh(&self) -> Result<()> {
        Ok(())
    }

    async fn leave(&self) -> Result<()> {
        Ok(())
    }
}
