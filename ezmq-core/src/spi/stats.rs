//! Queue inspection: lengths and peeking.

use async_trait::async_trait;

use crate::error::Result;
use crate::job::Job;
use crate::topic::Topic;

/// Counting waiting messages ([`Capability::QueueStats`](super::Capability::QueueStats)).
#[async_trait]
pub trait QueueStats: Send + Sync {
    /// Messages of `topic` waiting to be delivered across the whole broker
    /// (every node of a cluster), not counting the ones being processed nor
    /// delayed ones. Fails rather than answer a partial count.
    async fn queue_len(&self, topic: &Topic) -> Result<u64>;

    /// Messages of `topic` delivered to a consumer and not settled yet
    /// (being processed), across the whole broker; `None` when the broker
    /// cannot count them (the default).
    async fn in_flight(&self, topic: &Topic) -> Result<Option<u64>> {
        let _ = topic;
        Ok(None)
    }

    /// The user topics (not ezmq's internal ones) that hold jobs, or held
    /// some recently, as the broker can list them; `None` when it cannot
    /// (the default). [`Admin::topics`](crate::Admin::topics) adds the
    /// topics live listeners consume.
    async fn topics(&self) -> Result<Option<Vec<Topic>>> {
        Ok(None)
    }
}

/// Reading waiting messages without consuming them
/// ([`Capability::Peek`](super::Capability::Peek)).
#[async_trait]
pub trait Peek: Send + Sync {
    /// Up to `n` waiting messages of `topic`, oldest first.
    async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>>;
}
