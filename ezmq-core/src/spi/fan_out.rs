//! Fan-out to consumer groups: broadcast.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::Result;
use crate::push_options::PushOptions;
use crate::topic::Topic;

/// Consumer groups on a topic: every group gets every message published
/// with [`FanOut::publish_to_groups`], and one member of each group
/// processes it ([`Capability::FanOut`](super::Capability::FanOut)).
/// Members receive with [`Source::Group`](super::Source::Group).
#[async_trait]
pub trait FanOut: Send + Sync {
    /// Stores one copy of the message for every group of `topic` that
    /// exists now. Returns the number of groups reached when the broker
    /// tells it, `None` when it does not (a native fan-out exchange).
    /// `options.ttl` bounds how long an unconsumed copy is kept.
    async fn publish_to_groups(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<Option<usize>>;

    /// Why this backend cannot delay a broadcast (`options.delay`), or
    /// `None` when it can (the default). With a reason, a delayed
    /// broadcast fails before anything is sent with
    /// [`Error::InvalidOption`](crate::Error::InvalidOption) carrying it.
    fn cannot_delay_broadcasts(&self) -> Option<&'static str> {
        None
    }

    /// Makes this client a member of `group` on `topic`, creating the group
    /// when it is new (it then gets messages published from now on). A
    /// group without live members is dropped after `retention`.
    async fn join_group(
        &self,
        topic: &Topic,
        group: &Topic,
        retention: Duration,
    ) -> Result<Box<dyn GroupMembership>>;

    /// The groups of `topic` that exist now, sorted by name, with what the
    /// broker tells about each; `None` when the broker cannot list them
    /// (the default; a native fan-out exchange does not know its queues'
    /// consumers by group).
    async fn groups(&self, topic: &Topic) -> Result<Option<Vec<GroupInfo>>> {
        let _ = topic;
        Ok(None)
    }
}

/// One consumer group of a fan-out topic, as [`FanOut::groups`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupInfo {
    /// The group's name.
    pub name: String,
    /// Its live members, when the broker can count them (each backend's
    /// docs say what "live" means there).
    pub members: Option<u64>,
    /// Messages waiting for the group, when the broker can count them.
    pub waiting: Option<u64>,
}

impl GroupInfo {
    /// Group `name` with nothing known about it.
    pub fn new(name: impl Into<String>) -> Self {
        GroupInfo {
            name: name.into(),
            members: None,
            waiting: None,
        }
    }

    /// Sets [`GroupInfo::members`].
    #[must_use]
    pub fn with_members(mut self, members: u64) -> Self {
        self.members = Some(members);
        self
    }

    /// Sets [`GroupInfo::waiting`].
    #[must_use]
    pub fn with_waiting(mut self, waiting: u64) -> Self {
        self.waiting = Some(waiting);
        self
    }
}

/// One member's place in a group, kept alive while the member runs.
#[async_trait]
pub trait GroupMembership: Send + Sync + fmt::Debug {
    /// Called about every `retention / 3` while the member runs.
    async fn refresh(&self) -> Result<()>;

    /// Called once when the member stops.
    async fn leave(&self) -> Result<()>;
}
