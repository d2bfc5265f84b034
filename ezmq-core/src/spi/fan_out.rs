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

    /// Makes this client a member of `group` on `topic`, creating the group
    /// when it is new (it then gets messages published from now on). A
    /// group without live members is dropped after `retention`.
    async fn join_group(
        &self,
        topic: &Topic,
        group: &Topic,
        retention: Duration,
    ) -> Result<Box<dyn GroupMembership>>;
}

/// One member's place in a group, kept alive while the member runs.
#[async_trait]
pub trait GroupMembership: Send + Sync + fmt::Debug {
    /// Called about every `retention / 3` while the member runs.
    async fn refresh(&self) -> Result<()>;

    /// Called once when the member stops.
    async fn leave(&self) -> Result<()>;
}
