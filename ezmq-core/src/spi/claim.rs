//! Exclusive claims: distributed cron's one-winner-per-tick.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::topic::Topic;

/// A claim that exactly one of many concurrent callers, in any process,
/// wins ([`Capability::ExclusiveClaim`](super::Capability::ExclusiveClaim)).
/// Distributed cron claims each tick with it.
#[async_trait]
pub trait ExclusiveClaim: Send + Sync {
    /// Tries to take the claim `key` for `hold`. Returns `true` for exactly
    /// one caller while the claim is held, `false` for every other caller.
    async fn try_claim(&self, key: &Topic, hold: Duration) -> Result<bool>;
}
