//! [`FanOut`] on Disque, which has no pub/sub and no key-value store:
//! broadcast groups built from queues.
//!
//! - Each group has its own queue `__ezmq|bc|<topic>|<group>` (see
//!   [`group_queue`]), which its members consume like any topic
//!   (`receive(Source::Group { .. })`).
//! - Membership lives in the registry queue `__ezmq|bcg|<topic>`, which
//!   nobody consumes: each member keeps one announcement there, a
//!   replicated job whose body is the group name and whose TTL is the
//!   group's retention, replaced at every refresh.
//! - A producer reads the registry with a cluster-wide `QPEEK`, keeps the
//!   distinct group names for [`DISCOVERY_INTERVAL`](registry::DISCOVERY_INTERVAL)
//!   (forgotten at once when a member joins through the same backend), and
//!   adds one copy per group, concurrently.

mod names;
mod registry;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{Backend, FanOut, GroupInfo, GroupMembership};
use ezmq_core::{PushOptions, Result, Topic};
use futures::StreamExt as _;
use tracing::{debug, warn};

use crate::backend::DisqueBackend;

pub(crate) use names::group_queue;
pub(crate) use registry::FanOutState;
use registry::{Membership, RegistryRead, DISCOVERY_LIMIT};

/// Most copies of one broadcast added at the same time.
const PUSH_PARALLELISM: usize = 64;

impl DisqueBackend {
    /// The groups of broadcast topic `topic` (cached, see [`FanOutState`]).
    async fn broadcast_groups(&self, topic: &Topic) -> Result<Arc<[Topic]>> {
        let registry = names::registry(topic)?;
        self.fan_out_state()
            .groups(topic, &registry, || self.read_registry(&registry))
            .await
    }

    /// Every announcement in `registry`, across the cluster, and whether
    /// every node could be read. Fails only when no node answered.
    async fn read_registry(&self, registry: &Topic) -> Result<RegistryRead> {
        let (jobs, failed) = self
            .peek_jobs_counting_failures(registry, DISCOVERY_LIMIT)
            .await?;
        if let Some(err) = &failed {
            debug!(%registry, cause = %err, "some nodes could not be read");
        }
        Ok(RegistryRead {
            jobs,
            complete: failed.is_none(),
        })
    }
}

#[async_trait]
impl FanOut for DisqueBackend {
    /// One `ADDJOB` per group known now, to the group's queue, with the
    /// caller's options (so `ttl` bounds how long an unconsumed copy
    /// waits). Returns the number of groups. Fails when the registry
    /// cannot be read and no group is known; when adding a copy fails, the
    /// first error is returned (copies for other groups may be stored).
    async fn publish_to_groups(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<Option<usize>> {
        let groups = self.broadcast_groups(topic).await?;
        if groups.is_empty() {
            debug!(%topic, "no consumer group known; nothing stored");
            return Ok(Some(0));
        }
        let mut queues = Vec::with_capacity(groups.len());
        for group in groups.iter() {
            queues.push(group_queue(topic, group)?);
        }
        let body = &body;
        let results: Vec<Result<_>> = futures::stream::iter(queues)
            .map(|queue| async move { self.publish(&queue, body.clone(), options).await })
            .buffer_unordered(PUSH_PARALLELISM)
            .collect()
            .await;
        let total = results.len();
        let stored = results.iter().filter(|r| r.is_ok()).count();
        if stored < total {
            warn!(%topic, stored, failed = total - stored, "broadcast stored for only some groups");
        }
        for result in results {
            result?;
        }
        debug!(%topic, groups = total, "broadcast stored");
        Ok(Some(total))
    }

    /// Stores the member's first announcement (so broadcasts from this
    /// backend reach the group at once, and from other clients within the
    /// discovery interval), then hands out the membership that refreshes
    /// it.
    async fn join_group(
        &self,
        topic: &Topic,
        group: &Topic,
        retention: Duration,
    ) -> Result<Box<dyn GroupMembership>> {
        // Fails early for a too-long combination.
        group_queue(topic, group)?;
        let registry = names::registry(topic)?;
        let membership = Membership::new(self.clone(), registry.clone(), group.clone(), retention);
        membership.announce().await?;
        self.fan_out_state().invalidate(&registry).await;
        Ok(Box::new(membership))
    }

    /// The groups announced in the topic's registry (a fresh cluster-wide
    /// `QPEEK`, not the producers' cache). `members` counts announcements:
    /// one per running member, plus one per member that stopped less than
    /// the group's retention ago; `waiting` is the group queue's `QLEN`
    /// summed over every node. Fails when some node cannot be read.
    async fn groups(&self, topic: &Topic) -> Result<Option<Vec<GroupInfo>>> {
        let registry = names::registry(topic)?;
        let (jobs, failed) = self
            .peek_jobs_counting_failures(&registry, DISCOVERY_LIMIT)
            .await?;
        if let Some(err) = failed {
            return Err(err.into());
        }
        let mut members: std::collections::BTreeMap<Topic, u64> = Default::default();
        for job in &jobs {
            if let Ok(Ok(group)) = std::str::from_utf8(job.body()).map(Topic::new) {
                *members.entry(group).or_default() += 1;
            }
        }
        let mut groups = Vec::with_capacity(members.len());
        for (group, count) in members {
            let waiting = self.queue_length(&group_queue(topic, &group)?).await?;
            groups.push(
                GroupInfo::new(group.as_str())
                    .with_members(count)
                    .with_waiting(waiting),
            );
        }
        Ok(Some(groups))
    }
}
