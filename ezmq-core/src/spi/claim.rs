//! Exclusive claims: distributed cron's one-winner-per-tick, and the
//! held keys that unique jobs and cluster-wide pauses are made of.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::topic::Topic;

/// What [`ExclusiveClaim::claim`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// The caller holds the claim now, under its token, until the hold
    /// ends or it releases the claim.
    Won,
    /// Another caller holds it: its token, when the broker tells it (a
    /// claim split between callers that nobody won has none).
    Held(Option<String>),
}

/// A claim that exactly one of many concurrent callers, in any process,
/// wins ([`Capability::ExclusiveClaim`](super::Capability::ExclusiveClaim)).
/// Distributed cron claims each tick with [`ExclusiveClaim::try_claim`];
/// unique jobs and topic pauses hold a key under a token
/// ([`ExclusiveClaim::claim`]) that others can read
/// ([`ExclusiveClaim::holder`]) and its holder can give back
/// ([`ExclusiveClaim::release`]).
///
/// Every caller of one key must use the same `hold`; a hold is at most
/// [`MAX_CLAIM_HOLD`].
#[async_trait]
pub trait ExclusiveClaim: Send + Sync {
    /// Tries to take the claim `key` for `hold`. Returns `true` for exactly
    /// one caller while the claim is held, `false` for every other caller.
    async fn try_claim(&self, key: &Topic, hold: Duration) -> Result<bool>;

    /// Takes `key` for `hold` under `token` (1 to 200 bytes), unless
    /// somebody holds it: exactly one of concurrent callers wins. A caller
    /// that already holds it under the same token is told
    /// [`ClaimOutcome::Held`] with its own token.
    async fn claim(&self, key: &Topic, token: &str, hold: Duration) -> Result<ClaimOutcome>;

    /// The token `key` is held under, `None` when nobody holds it.
    async fn holder(&self, key: &Topic) -> Result<Option<String>>;

    /// Gives `key` back when `token` holds it; `true` when it did. Another
    /// holder's claim is left alone.
    async fn release(&self, key: &Topic, token: &str) -> Result<bool>;
}

/// The longest hold a claim takes (30 days): the longest every broker
/// keeps a claim for (RabbitMQ's timers end below 50 days).
pub const MAX_CLAIM_HOLD: Duration = Duration::from_secs(30 * 24 * 3600);
