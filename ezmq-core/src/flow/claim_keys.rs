//! Per-key starts reserved in exclusive claims, for backends without a
//! [`RateLimiter`](crate::spi::RateLimiter) of their own.
//!
//! A key's limit of `n` per `per` is cut into blocks of whole periods, at
//! least a second long (`B`), each with `n · B / per` starts evenly
//! spaced. The starts of a block are split into up to four chunks, each
//! a quarter of the block's time. Chunk `j` of block `s` is the claim
//! `__ezmq|rkey|<topic>|<fingerprint>|<key hash>|<s>|<j>`: whoever wins
//! it ([`ExclusiveClaim::try_claim`]) owns its starts, and hands them to
//! its own jobs of that key, earliest first; a listener asks first for
//! the chunk of the present moment, so a key's job under its limit gets
//! the next start of the grid (one interval away at most). Each start is owned once,
//! cluster-wide, so a key never starts more than its limit's spaced
//! starts (plus what comes late and bunches). A claim is held until its
//! block ends plus 2 s: this holds while the processes' clocks differ by
//! less than that.
//!
//! The cost is one claim per chunk a listener uses: at most four a block
//! per key and listener, however many jobs; a quiet key's job takes one
//! chunk (and its unused starts lapse). Keys are tracked in a map bounded
//! by [`MAX_KEYS`]: the oldest lapsed entries are dropped first.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use crate::error::Result;
use crate::rate_limit::RateLimit;
use crate::spi::{ExclusiveClaim, Reservation};
use crate::topic::Topic;

/// Chunks a block's starts are dealt into, at most.
const MAX_CHUNKS: u64 = 4;

/// The shortest block, in milliseconds.
const MIN_BLOCK_MS: u64 = 1000;

/// How far the processes' clocks may differ (see the module documentation).
const CLOCK_SKEW: Duration = Duration::from_secs(2);

/// Keys tracked at once before lapsed ones are dropped.
const MAX_KEYS: usize = 4096;

/// How a key's limit is cut into blocks and chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Blocks {
    block_ms: u64,
    starts: u64,
    chunks: u64,
}

impl Blocks {
    fn of(limit: &RateLimit) -> Self {
        let per = limit.per_millis();
        let periods = MIN_BLOCK_MS.div_ceil(per).max(1);
        let block_ms = per.saturating_mul(periods);
        let starts = u64::from(limit.n()).saturating_mul(periods).max(1);
        Blocks {
            block_ms,
            starts,
            chunks: starts.min(MAX_CHUNKS),
        }
    }

    /// The starts (ms since the epoch) of chunk `chunk` of block `block`:
    /// its share of the block's starts, in time order.
    fn starts_of(&self, block: u64, chunk: u64) -> impl Iterator<Item = u64> + '_ {
        let begin = block.saturating_mul(self.block_ms);
        let first = chunk * self.starts / self.chunks;
        let end = (chunk + 1) * self.starts / self.chunks;
        (first..end).map(move |m| begin + m * self.block_ms / self.starts)
    }

    /// The chunk holding the first start at or after `now_ms`.
    fn chunk_at(&self, now_ms: u64) -> (u64, u64) {
        let block = now_ms / self.block_ms;
        let into = now_ms - block * self.block_ms;
        // Start `m` is `m · block_ms / starts` (rounded down) into the
        // block: the first at or after `into` is this one.
        let m = (into * self.starts).div_ceil(self.block_ms);
        if m >= self.starts {
            return (block + 1, 0);
        }
        let chunk = (0..self.chunks)
            .rev()
            .find(|j| j * self.starts / self.chunks <= m)
            .unwrap_or(0);
        (block, chunk)
    }
}

/// One key's starts that this listener owns, and where its next claim is.
#[derive(Debug, Default)]
struct KeyStarts {
    owned: BTreeSet<u64>,
    /// The next chunk to try: `(block, chunk)`.
    next: (u64, u64),
}

/// One listener's side of its per-key buckets.
#[derive(Debug, Default)]
pub(crate) struct ClaimKeyLimiter {
    keys: HashMap<String, KeyStarts>,
}

impl ClaimKeyLimiter {
    /// A limiter that owns nothing yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Reserves the next start of key `key` (its hash) of `topic` within
    /// `horizon` of `now_ms`, through `claims`.
    pub(crate) async fn reserve(
        &mut self,
        claims: &dyn ExclusiveClaim,
        topic: &Topic,
        key: &str,
        limit: &RateLimit,
        horizon: Duration,
        now_ms: u64,
    ) -> Result<Reservation> {
        let blocks = Blocks::of(limit);
        let until = now_ms.saturating_add(u64::try_from(horizon.as_millis()).unwrap_or(u64::MAX));
        self.bound(now_ms);
        let starts = self.keys.entry(key.to_owned()).or_default();
        starts.owned = starts.owned.split_off(&now_ms);
        // Enough tries to reach a free chunk past every other listener's.
        let mut tries = 2 * blocks.chunks + 2;
        loop {
            if let Some(&at) = starts.owned.first() {
                if at <= until {
                    starts.owned.remove(&at);
                    return Ok(Reservation::Start(Duration::from_millis(at - now_ms)));
                }
                return Ok(Reservation::Later(Duration::from_millis(at - now_ms)));
            }
            let current = blocks.chunk_at(now_ms);
            if starts.next < current {
                starts.next = current;
            }
            let (block, chunk) = starts.next;
            let block_start = block.saturating_mul(blocks.block_ms);
            if block_start > until || tries == 0 {
                return Ok(Reservation::Later(Duration::from_millis(
                    block_start.saturating_sub(now_ms).max(1),
                )));
            }
            tries -= 1;
            starts.next = if chunk + 1 < blocks.chunks {
                (block, chunk + 1)
            } else {
                (block + 1, 0)
            };
            let fingerprint = format!("{}-{}-{}", limit.n(), limit.per_millis(), limit.burst());
            let key = Topic::internal(
                "rkey",
                &[
                    topic.as_str(),
                    &fingerprint,
                    key,
                    &block.to_string(),
                    &chunk.to_string(),
                ],
            )?;
            let block_end = block_start + blocks.block_ms;
            let hold = Duration::from_millis(block_end.saturating_sub(now_ms)) + CLOCK_SKEW;
            if claims.try_claim(&key, hold).await? {
                starts
                    .owned
                    .extend(blocks.starts_of(block, chunk).filter(|at| *at >= now_ms));
            }
        }
    }

    /// Drops keys that own nothing still to come once there are too many.
    fn bound(&mut self, now_ms: u64) {
        if self.keys.len() < MAX_KEYS {
            return;
        }
        self.keys
            .retain(|_, starts| starts.owned.last().is_some_and(|at| *at >= now_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_a_second_or_more_of_spaced_starts() {
        let ten = Blocks::of(&RateLimit::new(10, Duration::from_secs(1)));
        assert_eq!(
            ten,
            Blocks {
                block_ms: 1000,
                starts: 10,
                chunks: 4
            }
        );
        let starts: Vec<u64> = (0..4).flat_map(|j| ten.starts_of(2, j)).collect();
        let expected: Vec<u64> = (0..10).map(|m| 2000 + m * 100).collect();
        assert_eq!(starts, expected, "every start once, in time order");
        assert_eq!(ten.starts_of(2, 1).collect::<Vec<_>>(), [2200, 2300, 2400]);
        assert_eq!(
            ten.chunk_at(2450),
            (2, 2),
            "the next start, 2500, is chunk 2's"
        );
        assert_eq!(ten.chunk_at(2400), (2, 1));
        assert_eq!(ten.chunk_at(2901), (3, 0));
        assert_eq!(ten.chunk_at(3000), (3, 0));
        let slow = Blocks::of(&RateLimit::new(2, Duration::from_secs(60)));
        assert_eq!((slow.block_ms, slow.starts, slow.chunks), (60_000, 2, 2));
        let fast = Blocks::of(&RateLimit::new(1, Duration::from_millis(10)));
        assert_eq!((fast.block_ms, fast.starts, fast.chunks), (1000, 100, 4));
    }
}
