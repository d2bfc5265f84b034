//! Consumer groups on the in-memory broker: every group gets a copy of
//! each message published after it was created; its members share it.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{FanOut, GroupInfo, GroupMembership, Source};
use ezmq_core::{PushOptions, Result, Topic};
use tokio::time::Instant;

use super::state::{lock, Group};
use super::{Connection, MemoryBackend, MemoryBroker};

#[async_trait]
impl FanOut for MemoryBackend {
    async fn publish_to_groups(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<Option<usize>> {
        self.ensure_open()?;
        let now = Instant::now();
        let mut state = self.state();
        state.prune_groups(topic, now);
        let groups: Vec<Topic> = state
            .groups
            .get(topic)
            .map(|groups| groups.keys().cloned().collect())
            .unwrap_or_default();
        if groups.is_empty() {
            return Ok(Some(0));
        }
        let message = Self::message(&mut state, body, options, now);
        for group in &groups {
            let source = Source::Group {
                topic: topic.clone(),
                group: group.clone(),
            };
            Self::enqueue(&mut state, &source, message.clone(), options.delay, now);
        }
        Ok(Some(groups.len()))
    }

    async fn join_group(
        &self,
        topic: &Topic,
        group: &Topic,
        retention: Duration,
    ) -> Result<Box<dyn GroupMembership>> {
        self.ensure_open()?;
        let now = Instant::now();
        let mut state = self.state();
        state.prune_groups(topic, now);
        let member = state.next_seq();
        refresh_member(&mut state.groups, topic, group, member, now + retention);
        tracing::debug!(%topic, %group, member, "joined consumer group");
        Ok(Box::new(MemoryMembership {
            broker: self.broker.clone(),
            conn: std::sync::Arc::clone(&self.conn),
            topic: topic.clone(),
            group: group.clone(),
            member,
            retention,
        }))
    }

    async fn groups(&self, topic: &Topic) -> Result<Option<Vec<GroupInfo>>> {
        self.ensure_open()?;
        let now = Instant::now();
        let mut state = self.state();
        state.prune_groups(topic, now);
        let members: Vec<(Topic, u64)> = state
            .groups
            .get(topic)
            .map(|groups| {
                groups
                    .iter()
                    .map(|(name, group)| (name.clone(), group.live_members(now)))
                    .collect()
            })
            .unwrap_or_default();
        let infos = members
            .into_iter()
            .map(|(name, live)| {
                let source = Source::Group {
                    topic: topic.clone(),
                    group: name.clone(),
                };
                let waiting = state.existing_queue(&source).map_or(0, |queue| {
                    queue.sweep(now);
                    queue.ready_len(now)
                });
                GroupInfo::new(name.as_str())
                    .with_members(live)
                    .with_waiting(waiting)
            })
            .collect();
        Ok(Some(infos))
    }
}

/// Sets `member`'s retention end in `group` of `topic` to `until`,
/// creating the group when it is new.
fn refresh_member(
    groups: &mut HashMap<Topic, std::collections::BTreeMap<Topic, Group>>,
    topic: &Topic,
    group: &Topic,
    member: u64,
    until: Instant,
) {
    let entry = groups
        .entry(topic.clone())
        .or_default()
        .entry(group.clone())
        .or_insert_with(|| Group {
            members: HashMap::new(),
            keep_until: until,
        });
    entry.members.insert(member, until);
    entry.keep_until = entry.keep_until.max(until);
}

/// One member's place in a group of the in-memory broker.
#[derive(Debug)]
struct MemoryMembership {
    broker: MemoryBroker,
    conn: std::sync::Arc<Connection>,
    topic: Topic,
    group: Topic,
    member: u64,
    retention: Duration,
}

#[async_trait]
impl GroupMembership for MemoryMembership {
    async fn refresh(&self) -> Result<()> {
        self.broker.usable(&self.conn)?;
        let now = Instant::now();
        let mut state = lock(&self.broker.state);
        state.prune_groups(&self.topic, now);
        // A group dropped meanwhile (the member was away longer than the
        // retention) is created again, empty.
        refresh_member(
            &mut state.groups,
            &self.topic,
            &self.group,
            self.member,
            now + self.retention,
        );
        Ok(())
    }

    async fn leave(&self) -> Result<()> {
        self.broker.usable(&self.conn)?;
        let now = Instant::now();
        let mut state = lock(&self.broker.state);
        if let Some(group) = state
            .groups
            .get_mut(&self.topic)
            .and_then(|groups| groups.get_mut(&self.group))
        {
            group.members.remove(&self.member);
            group.keep_until = group.keep_until.max(now + self.retention);
        }
        tracing::debug!(topic = %self.topic, group = %self.group, member = self.member, "left consumer group");
        Ok(())
    }
}
