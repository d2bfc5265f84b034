//! Broadcast: one stream per broadcast topic, one consumer group per
//! broadcast group.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{FanOut, GroupInfo, GroupMembership, Source};
use ezmq_core::{PushOptions, Result, Topic};

use crate::backend::{ms_ceil, unix_ms, Inner, RedisBackend};
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
        let message = inner.outgoing(&body, options);
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
        let membership = Membership {
            inner: Arc::clone(inner),
            state,
            retention,
            members_key: members_key(&inner.config.key_prefix, topic),
            member: format!("{group}|{}", inner.consumer),
        };
        membership.announce().await?;
        tracing::debug!(%topic, %group, created, "joined broadcast group");
        Ok(Box::new(membership))
    }

    /// The groups in the topic's registry whose retention has not run out
    /// (`XINFO GROUPS`, in one script). `members`: the clients whose
    /// membership announcement (refreshed with the group, removed when
    /// the member leaves) has not expired: a member that died counts until
    /// its retention ends. `waiting`: the group's lag, when the server
    /// reports it (Redis 7).
    async fn groups(&self, topic: &Topic) -> Result<Option<Vec<GroupInfo>>> {
        let inner = &self.inner;
        inner.ensure_open()?;
        let keys = TopicKeys::broadcast(&inner.config.key_prefix, topic);
        let flat: Vec<redis::Value> = scripts::GROUPS
            .key(&keys.stream)
            .key(&keys.groups)
            .key(members_key(&inner.config.key_prefix, topic))
            .invoke_async(&mut inner.conn())
            .await
            .map_err(error::command("groups script"))?;
        let mut groups = Vec::with_capacity(flat.len() / 3);
        for row in flat.chunks_exact(3) {
            let name: String = parse(&row[0])?;
            let members: i64 = parse(&row[1])?;
            let lag: i64 = parse(&row[2])?;
            let mut info = GroupInfo::new(name).with_members(u64::try_from(members).unwrap_or(0));
            if let Ok(lag) = u64::try_from(lag) {
                info = info.with_waiting(lag);
            }
            groups.push(info);
        }
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Some(groups))
    }
}

/// One value of the groups script's reply.
fn parse<T: redis::FromRedisValue>(value: &redis::Value) -> Result<T> {
    redis::from_redis_value(value.clone())
        .map_err(|e| error::command("groups script")(redis::RedisError::from(e)))
}

/// The hash of a broadcast topic's members: field `<group>|<consumer>`,
/// value the announcement's deadline in Unix milliseconds. Same hash tag
/// as the topic's other keys.
fn members_key(prefix: &str, topic: &Topic) -> String {
    format!("{}m", TopicKeys::broadcast(prefix, topic).groups)
}

/// A member's place in a broadcast group.
struct Membership {
    inner: Arc<Inner>,
    state: Arc<SourceState>,
    retention: Duration,
    /// See [`members_key`].
    members_key: String,
    /// This member's field in it.
    member: String,
}

impl Membership {
    /// Writes (or pushes back) this member's announcement deadline.
    async fn announce(&self) -> Result<()> {
        let deadline = unix_ms().saturating_add(ms_ceil(self.retention));
        redis::cmd("HSET")
            .arg(&self.members_key)
            .arg(&self.member)
            .arg(deadline)
            .query_async::<()>(&mut self.inner.conn())
            .await
            .map_err(error::command("HSET"))
    }
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
        self.announce().await
    }

    /// Removes this member's announcement. The group stays (other members
    /// may still run, and a restarted member continues where the group
    /// was) until it has not been refreshed for its retention.
    async fn leave(&self) -> Result<()> {
        redis::cmd("HDEL")
            .arg(&self.members_key)
            .arg(&self.member)
            .query_async::<()>(&mut self.inner.conn())
            .await
            .map_err(error::command("HDEL"))
    }
}
