//! Broadcast groups: broadcasts go to a stream with interest retention,
//! and each group is a durable pull consumer of the topic's subject
//! there (a message is kept until every group has it acknowledged). A
//! group no member pulls from for `retention` is dropped by the server
//! (the consumer's inactivity threshold).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{FanOut, GroupInfo, GroupMembership, Source};
use ezmq_core::{PushOptions, Result, Topic};
use futures::StreamExt;

use crate::backend::{Inner, NatsBackend};
use crate::names::untoken;
use crate::push::Outgoing;

/// The inactivity threshold of a group consumer created by a receive
/// before any member joined (a join sets the group's own).
const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// The consumer configuration of `group` on `topic`.
pub(crate) fn group_consumer_config(
    inner: &Inner,
    topic: &Topic,
    group: &Topic,
    retention: Option<Duration>,
) -> pull::Config {
    let name = inner.names.group_consumer(topic, group);
    pull::Config {
        durable_name: Some(name),
        filter_subject: inner.names.broadcast_subject(topic),
        ack_policy: AckPolicy::Explicit,
        ack_wait: inner.config.lease,
        max_deliver: -1,
        max_ack_pending: -1,
        deliver_policy: DeliverPolicy::New,
        inactive_threshold: retention.unwrap_or(DEFAULT_RETENTION),
        ..Default::default()
    }
}

#[async_trait]
impl FanOut for NatsBackend {
    /// One publish to the broadcast subject; JetStream keeps it for each
    /// group. The number of groups is not told (`None`).
    async fn publish_to_groups(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<Option<usize>> {
        let inner = &self.inner;
        let mut message = Outgoing::job(inner, topic.as_str(), &options.headers, &body, options);
        message.subject = inner.names.broadcast_subject(topic).into();
        crate::push::store(inner, topic, message).await?;
        Ok(None)
    }

    fn cannot_delay_broadcasts(&self) -> Option<&'static str> {
        Some(
            "NATS JetStream 2.9 has no per-message schedule and ezmq's delayed stream moves a \
             job into one topic's queue, not into every broadcast group",
        )
    }

    async fn join_group(
        &self,
        topic: &Topic,
        group: &Topic,
        retention: Duration,
    ) -> Result<Box<dyn GroupMembership>> {
        let inner = &self.inner;
        let name = inner.names.group_consumer(topic, group);
        let config = group_consumer_config(inner, topic, group, Some(retention));
        inner
            .timed(
                "join group",
                inner
                    .broadcast
                    .get_or_create_consumer::<pull::Config>(&name, config),
            )
            .await?;
        Ok(Box::new(NatsMembership {
            inner: Arc::clone(inner),
            source: Source::Group {
                topic: topic.clone(),
                group: group.clone(),
            },
        }))
    }

    /// The groups of `topic` with their waiting counts (the server does
    /// not tell how many members pull from a group).
    async fn groups(&self, topic: &Topic) -> Result<Option<Vec<GroupInfo>>> {
        let inner = &self.inner;
        inner.ensure_open()?;
        let subject = inner.names.broadcast_subject(topic);
        let prefix = format!("g_{}_", crate::names::token(topic.as_str()));
        let mut consumers = inner.broadcast.consumers();
        let mut groups = Vec::new();
        while let Some(info) = tokio::time::timeout(inner.config.command_timeout, consumers.next())
            .await
            .map_err(|_| crate::error::NatsBackendError::NoReply {
                request: "groups",
                after: inner.config.command_timeout,
            })?
        {
            let info = info.map_err(crate::error::request("groups"))?;
            if info.config.filter_subject != subject {
                continue;
            }
            let Some(name) = info.name.strip_prefix(&prefix).and_then(untoken) else {
                continue;
            };
            groups.push(GroupInfo::new(name).with_waiting(info.num_pending));
        }
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Some(groups))
    }
}

/// A member of a group: its pulls keep the group's consumer active.
struct NatsMembership {
    inner: Arc<Inner>,
    source: Source,
}

impl fmt::Debug for NatsMembership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsMembership")
            .field("source", &self.source)
            .finish()
    }
}

#[async_trait]
impl GroupMembership for NatsMembership {
    /// Looks the group's consumer up (a request the server counts as
    /// activity), creating it again if the server dropped it.
    async fn refresh(&self) -> Result<()> {
        let consumer = self.inner.consumer(&self.source).await?;
        match self.inner.timed("refresh group", consumer.get_info()).await {
            Ok(_) => Ok(()),
            Err(err) => {
                if let Some(group) = self.source.group() {
                    self.inner.forget_consumer(
                        &self.inner.names.group_consumer(self.source.topic(), group),
                    );
                }
                Err(err)
            }
        }
    }

    /// Nothing to do: the group stays for its other members, and is
    /// dropped once nobody pulls from it for its retention.
    async fn leave(&self) -> Result<()> {
        Ok(())
    }
}
