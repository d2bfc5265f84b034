//! Cluster-wide rate limits: tokens a listener takes before it fetches
//! ([`Capability::RateLimit`](super::Capability::RateLimit)), and starts
//! reserved for one key of a per-key limit
//! ([`Capability::RateLimitByKey`](super::Capability::RateLimitByKey)).

use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::rate_limit::RateLimit;
use crate::topic::Topic;

/// What [`RateLimiter::take`] granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Tokens taken: handler starts the caller may make.
    pub tokens: u32,
    /// How long the tokens stay good: a start after that would break the
    /// limit's bound, so the caller drops what it did not use by then.
    pub usable_for: Duration,
    /// With no token granted, how long until asking again can succeed.
    pub retry_after: Duration,
}

/// What [`RateLimiter::reserve`] reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reservation {
    /// A start is the caller's, this long from now (zero: now).
    Start(Duration),
    /// No start is free within the horizon: nothing was reserved; ask
    /// again no sooner than this long from now.
    Later(Duration),
}

/// The token bucket of [`RateLimit`] shared by every listener of a topic
/// in every process. A backend hands out its own from
/// [`Backend::rate_limiter`](super::Backend::rate_limiter) when its broker
/// can keep the bucket itself (a script); otherwise core keeps it in
/// claims ([`ExclusiveClaim`](super::ExclusiveClaim)), one per slice of
/// tokens.
///
/// Every listener of a bucket passes the same `limit`; a call never waits
/// for tokens (it says how long to wait instead).
#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Takes tokens of the bucket `bucket` now: up to `want`, or a larger
    /// share of the burst when that saves round trips (the caller keeps
    /// what it does not use at once until [`Grant::usable_for`] ends).
    async fn take(&self, bucket: &Topic, limit: &RateLimit, want: u32) -> Result<Grant>;

    /// Reserves the next free start of key `key` of `topic`'s per-key
    /// limit (`key` is a hash of the job's key: 16 hex digits): the
    /// earliest moment a start keeps the key within `limit`, if it is at
    /// most `horizon` away. Every reservation is a start someone makes
    /// (the caller defers its job to that moment), so the bucket never
    /// hands the same start out twice.
    async fn reserve(
        &self,
        topic: &Topic,
        key: &str,
        limit: &RateLimit,
        horizon: Duration,
    ) -> Result<Reservation>;
}
