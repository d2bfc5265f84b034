//! Broadcast: one stream per broadcast topic, one consumer group per
//! broadcast group.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{FanOut, GroupMembership, Source};
use ezmq_core::{PushOptions, Result, Topic};

use crate::backend::{ms_ceil, Inner, RedisBackend};
use crate::error;
use crate::keys::TopicKeys;
use crate::scripts;
use crate::source::SourceState;

#[async_trait]
impl FanOut for RedisBackend {
    /// One script: drops groups not refreshed within their retention,
    /// then (when a group is left) `XADD`s the message to the broadcast
    /// stream, trimmed with `MAXLEN ~` and `MINID ~` by the longest
    /// retention; a delayed message goes to the topic's delayed set and
    /// reaches the groups that exist when it comes due. Returns the number
    /// of live groups.
    async fn publish_to_groups(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<Option<usize>> {
        let inner = &self.inner;
        inner.ensure_open()?;
        let keys = TopicKeys::broadcast(&inner.config.key_prefix, topic);
        let message = inner.message(body, options);
        let delay = options.delay.filter(|d| !d.is_zero());
        let mut invocation = scripts::BROADCAST.prepare_invoke();
        invocation
            .key(&keys.stream)
            .key(&keys.groups)
            .key(&keys.delayed)
            .arg(inner.config.broadcast_max_len)
            .arg(delay.map_or(0, ms_ceil));
        match delay {
            Some(_) => invocation.arg(message.delayed_member()),
            None => invocation.arg(""),
        };
        for field in message.fields() {
            invocation.arg(field);
        }
        let live: i64 = invocation
            .invoke_async(&mut inner.conn())
            .await
            .map_err(error::command("broadcast script"))?;
        if live > 0 {
            inner.wait_replicas(&keys.stream).await?;
        }
        Ok(Some(usize::try_from(live).unwrap_or(0)))
    }

    /// Creates the group's consumer group at the stream's end (`$`): the
    /// group gets what is published from now on. Joining an existing group
    /// changes nothing but its deadline.
    async fn join_group(
        &self,
        topic: &Topic,
        group: &Topic,
        retention: Duration,
    ) -> Result<Box<dyn GroupMembership>> {
        let inner = &self.inner;
        inner.ensure_open()?;
        if let Ok(mut joined) = inner.joined.lock() {
            joined.insert((topic.clone(), group.clone()), retention);
        }
        let state = inner.source_state(&Source::Group {
            topic: topic.clone(),
            group: group.clone(),
        });
        let created = inner.join(&state, retention).await?;
        state.set_ready(true);
        tracing::debug!(%topic, %group, created, "joined broadcast group");
        Ok(Box::new(Membership {
            inner: Arc::clone(inner),
            state,
            retention,
        }))
    }
}

/// A member's place in a broadcast group.
struct Membership {
    inner: Arc<Inner>,
    state: Arc<SourceState>,
    retention: Duration,
}

impl fmt::Debug for Membership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Membership")
            .field("stream", &self.state.keys.stream)
            .field("group", &self.state.group)
            .field("retention", &self.retention)
            .finish()
    }
}

#[async_trait]
impl GroupMembership for Membership {
    /// Pushes the group's deadline to `now + retention` (recreating the
    /// group at `$` if it was dropped meanwhile).
    async fn refresh(&self) -> Result<()> {
        self.inner.ensure_open()?;
        self.inner.join(&self.state, self.retention).await?;
        Ok(())
    }

    /// Nothing to do: the group stays (other members may still run, and a
    /// restarted member continues where the group was) until it has not
    /// been refreshed for its retention.
    async fn leave(&self) -> Result<()> {
        Ok(())
    }
}
