//! A cluster-wide token bucket kept in exclusive claims, for backends
//! without a [`RateLimiter`](crate::spi::RateLimiter) of their own.
//!
//! Wall-clock time is cut into slices of `Δ = max(burst / rate, 20 ms)`,
//! each carrying `rate · Δ` tokens (the burst), split into up to four
//! chunks. Chunk `j` of slice `s = ⌊unix_ms / Δ⌋` is the claim
//! `__ezmq|rate|<topic>|<n>-<per_ms>-<burst>|<s>|<j>`: whoever wins it
//! ([`ExclusiveClaim::try_claim`]) owns its tokens, and may start them
//! until slice `s + 1` ends. Each chunk is won once, cluster-wide, so in
//! any window `T` at most `rate · T + 2 · burst` handlers start. The claim
//! is held for `2Δ + 2 s`, so this holds while the processes' clocks
//! differ by less than 2 s (keep them in NTP sync).
//!
//! A listener asks for the chunks it needs (at least one) among those of
//! the current slice it has not tried; when every chunk is gone it waits
//! for the next slice. The cost is at most four claims per slice per
//! listener, whatever the rate: about 40 a second for the default burst,
//! fewer for a limit that does not bite (a chunk then lasts its listener
//! the whole slice).

use std::time::Duration;

use super::unix_millis;
use crate::error::Result;
use crate::rate_limit::RateLimit;
use crate::spi::{ExclusiveClaim, Grant};
use crate::topic::Topic;

/// The shortest slice: below it claims would cost more than they hold.
const MIN_SLICE_MS: u64 = 20;

/// Chunks a slice's tokens are split into, at most: more let idle and
/// busy listeners share a slice more finely, at one claim each.
const MAX_CHUNKS: u32 = 4;

/// How far the processes' clocks may differ (see the module documentation).
const CLOCK_SKEW: Duration = Duration::from_secs(2);

/// How a limit's tokens are cut into slices and chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slicing {
    /// Length of a slice, in milliseconds.
    slice_ms: u64,
    /// Tokens in one slice.
    tokens: u32,
    /// Chunks one slice's tokens are split into.
    chunks: u32,
}

impl Slicing {
    fn of(limit: &RateLimit) -> Self {
        let per = u128::from(limit.per_millis());
        let n = u128::from(limit.n());
        let burst = u128::from(limit.burst());
        let slice_ms = u64::try_from((burst * per).div_ceil(n))
            .unwrap_or(u64::MAX)
            .max(MIN_SLICE_MS);
        let tokens = u32::try_from(n * u128::from(slice_ms) / per)
            .unwrap_or(u32::MAX)
            .max(1);
        Slicing {
            slice_ms,
            tokens,
            chunks: tokens.min(MAX_CHUNKS),
        }
    }

    /// Tokens in chunk `j`: the slice's, split as evenly as they go.
    fn chunk_tokens(&self, j: u32) -> u32 {
        self.tokens / self.chunks + u32::from(j < self.tokens % self.chunks)
    }

    /// How long every claim of this limit is held.
    fn hold(&self) -> Duration {
        Duration::from_millis(self.slice_ms.saturating_mul(2)) + CLOCK_SKEW
    }
}

/// One listener's side of a claim-kept bucket: which chunks of the
/// current slice it already tried (a claim is not asked for twice).
#[derive(Debug, Default)]
pub(crate) struct ClaimRateLimiter {
    slice: u64,
    tried: u32,
}

impl ClaimRateLimiter {
    /// A limiter that has tried nothing yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Takes up to `want` tokens of `bucket` now, through `claims`.
    pub(crate) async fn take(
        &mut self,
        claims: &dyn ExclusiveClaim,
        bucket: &Topic,
        limit: &RateLimit,
        want: u32,
    ) -> Result<Grant> {
        let grant = self
            .take_at(claims, bucket, limit, want, unix_millis())
            .await?;
        Ok(self.after_claims(grant, limit, unix_millis()))
    }

    /// `grant` as of `now_ms`, once its claims returned: they take time
    /// (tens of milliseconds on a loaded broker), so the waits counted from
    /// before them are shortened by it. When the slice ended meanwhile, the
    /// new one is asked for at once instead of a whole slice later, which
    /// lost a slice's tokens whenever a claim took longer than what was
    /// left of its slice.
    fn after_claims(&self, mut grant: Grant, limit: &RateLimit, now_ms: u64) -> Grant {
        let slice_ms = Slicing::of(limit).slice_ms;
        let now_slice = now_ms / slice_ms;
        let usable_until = self.slice.saturating_add(2).saturating_mul(slice_ms);
        grant.usable_for = Duration::from_millis(usable_until.saturating_sub(now_ms));
        if !grant.retry_after.is_zero() {
            grant.retry_after = if now_slice > self.slice {
                Duration::ZERO
            } else {
                Duration::from_millis(
                    now_slice
                        .saturating_add(1)
                        .saturating_mul(slice_ms)
                        .saturating_sub(now_ms),
                )
            };
        }
        grant
    }

    async fn take_at(
        &mut self,
        claims: &dyn ExclusiveClaim,
        bucket: &Topic,
        limit: &RateLimit,
        want: u32,
        now_ms: u64,
    ) -> Result<Grant> {
        let slicing = Slicing::of(limit);
        let slice = now_ms / slicing.slice_ms;
        if slice != self.slice {
            self.slice = slice;
            self.tried = 0;
        }
        let slice_start = slice.saturating_mul(slicing.slice_ms);
        let next_slice = Duration::from_millis(slice_start + slicing.slice_ms - now_ms);
        let usable_for = next_slice + Duration::from_millis(slicing.slice_ms);
        let picked = self.pick(&slicing, want);
        if picked.is_empty() {
            return Ok(Grant {
                tokens: 0,
                usable_for,
                retry_after: next_slice,
            });
        }
        let fingerprint = format!("{}-{}-{}", limit.n(), limit.per_millis(), limit.burst());
        let slice_text = slice.to_string();
        let mut keys = Vec::with_capacity(picked.len());
        for j in &picked {
            let chunk = j.to_string();
            keys.push(Topic::internal(
                "rate",
                &[bucket.as_str(), &fingerprint, &slice_text, &chunk],
            )?);
        }
        let hold = slicing.hold();
        let outcomes =
            futures::future::join_all(keys.iter().map(|key| claims.try_claim(key, hold))).await;
        let mut tokens = 0u32;
        let mut failure = None;
        for (j, outcome) in picked.iter().zip(outcomes) {
            match outcome {
                Ok(true) => tokens = tokens.saturating_add(slicing.chunk_tokens(*j)),
                Ok(false) => {}
                Err(err) => failure = Some(err),
            }
        }
        if let (0, Some(err)) = (tokens, failure) {
            return Err(err);
        }
        let untried = self.tried.count_ones() < slicing.chunks;
        Ok(Grant {
            tokens,
            usable_for,
            retry_after: if tokens == 0 && untried {
                Duration::ZERO
            } else {
                next_slice
            },
        })
    }

    /// Marks and returns the untried chunks to ask for: enough for `want`
    /// tokens (at least one chunk), starting at a random one so that
    /// listeners spread over the chunks.
    fn pick(&mut self, slicing: &Slicing, want: u32) -> Vec<u32> {
        let start = rand::random::<u32>() % slicing.chunks;
        let mut picked = Vec::new();
        let mut covered = 0u32;
        for step in 0..slicing.chunks {
            let j = (start + step) % slicing.chunks;
            if self.tried & (1 << j) != 0 {
                continue;
            }
            self.tried |= 1 << j;
            picked.push(j);
            covered = covered.saturating_add(slicing.chunk_tokens(j));
            if covered >= want.max(1) {
                break;
            }
        }
        picked
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Mutex;

    use async_trait::async_trait;

    use super::*;
    use crate::spi::ClaimOutcome;

    /// Claims that never expire: enough to count who wins what.
    #[derive(Default)]
    struct Claims(Mutex<HashSet<String>>);

    #[async_trait]
    impl ExclusiveClaim for Claims {
        async fn try_claim(&self, key: &Topic, _hold: Duration) -> Result<bool> {
            Ok(self.0.lock().expect("claims").insert(key.to_string()))
        }
        async fn claim(&self, _: &Topic, _: &str, _: Duration) -> Result<ClaimOutcome> {
            unreachable!("not used by the rate limiter")
        }
        async fn holder(&self, _: &Topic) -> Result<Option<String>> {
            unreachable!("not used by the rate limiter")
        }
        async fn release(&self, _: &Topic, _: &str) -> Result<bool> {
            unreachable!("not used by the rate limiter")
        }
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_slice_carries_the_burst() {
        let fifty = Slicing::of(&RateLimit::new(50, SECOND));
        assert_eq!((fifty.slice_ms, fifty.tokens, fifty.chunks), (100, 5, 4));
        assert_eq!(
            (0..4).map(|j| fifty.chunk_tokens(j)).sum::<u32>(),
            5,
            "the chunks share the slice's tokens"
        );
        let slow = Slicing::of(&RateLimit::new(1, Duration::from_secs(60)));
        assert_eq!((slow.slice_ms, slow.tokens, slow.chunks), (60_000, 1, 1));
        // A burst below 20 ms of the rate is raised to it.
        let fast = Slicing::of(&RateLimit::new(100_000, SECOND).with_burst(1));
        assert_eq!((fast.slice_ms, fast.tokens), (20, 2000));
    }

    #[tokio::test]
    async fn listeners_share_each_slice_once() {
        let claims = Claims::default();
        let bucket = Topic::new("mail").expect("topic");
        let limit = RateLimit::new(50, SECOND);
        let mut a = ClaimRateLimiter::new();
        let mut b = ClaimRateLimiter::new();
        let now = 1_000_000_050; // half-way through slice 10_000_000
        let mut total = 0;
        for limiter in [&mut a, &mut b] {
            loop {
                let grant = limiter
                    .take_at(&claims, &bucket, &limit, 2, now)
                    .await
                    .expect("take");
                assert_eq!(grant.usable_for, Duration::from_millis(150));
                total += grant.tokens;
                if grant.retry_after > Duration::ZERO && grant.tokens == 0 {
                    assert_eq!(grant.retry_after, Duration::from_millis(50));
                    break;
                }
            }
        }
        assert_eq!(total, 5, "one slice's tokens, whoever took them");
        let next = a
            .take_at(&claims, &bucket, &limit, 8, now + 100)
            .await
            .expect("take in the next slice");
        assert_eq!(
            next.tokens, 5,
            "a listener that wants them all gets them all"
        );
    }

    #[tokio::test]
    async fn a_slow_claim_shortens_the_waits_counted_before_it() {
        let claims = Claims::default();
        let bucket = Topic::new("mail").expect("topic");
        let limit = RateLimit::new(50, SECOND);
        let mut limiter = ClaimRateLimiter::new();
        let asked = 1_000_000_050; // half-way through a 100 ms slice
        let grant = limiter
            .take_at(&claims, &bucket, &limit, 8, asked)
            .await
            .expect("take");
        assert_eq!(grant.tokens, 5);
        // The claims returned 30 ms later: 120 ms of use left, not 150.
        let late = limiter.after_claims(grant, &limit, asked + 30);
        assert_eq!(late.usable_for, Duration::from_millis(120));
        let empty = Grant {
            tokens: 0,
            usable_for: Duration::ZERO,
            retry_after: Duration::from_millis(50),
        };
        // Still in the slice: wait for its end, counted from now.
        let waiting = limiter.after_claims(empty, &limit, asked + 30);
        assert_eq!(waiting.retry_after, Duration::from_millis(20));
        // The slice ended while the claims ran: ask again at once.
        let behind = limiter.after_claims(empty, &limit, asked + 70);
        assert_eq!(behind.retry_after, Duration::ZERO);
        assert_eq!(behind.usable_for, Duration::from_millis(80));
    }
}
