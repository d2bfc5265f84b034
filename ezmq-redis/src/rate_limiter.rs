//! Cluster-wide rate limits kept by Redis itself: one GCRA key per bucket
//! and one script per take, or per reserved start of a per-key limit.

use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use ezmq_core::spi::{Grant, RateLimiter, Reservation};
use ezmq_core::{RateLimit, Result, Topic};
use redis::Script;

use crate::backend::RedisBackend;
use crate::error;

/// What both scripts begin with: the server's clock (µs), the interval
/// (`ARGV[1]`, µs), the burst window (`ARGV[2]` intervals) and the
/// bucket's theoretical arrival time (`KEYS[1]`, no earlier than now).
const GCRA_PRELUDE: &str = r#"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local interval = tonumber(ARGV[1])
local window = interval * tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
"#;

/// What both scripts end with: the new arrival time stored, kept until
/// the bucket is full again.
const GCRA_STORE: &str = r#"
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
"#;

/// The generic cell rate algorithm on the server's clock. KEYS: the
/// bucket's key (its theoretical arrival time, µs). ARGV: the interval
/// between tokens (µs), the burst, the tokens wanted. Returns the tokens
/// granted and, with none, the µs until one is due.
static TAKE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r#"{GCRA_PRELUDE}
local allowed = math.floor((now + window - tat) / interval)
if allowed <= 0 then
  return {{0, tat + interval - window - now}}
end
local granted = math.min(tonumber(ARGV[3]), allowed)
tat = tat + granted * interval
{GCRA_STORE}
return {{granted, 0}}
"#
    ))
});

/// The same algorithm, reserving one start. KEYS: the key's bucket.
/// ARGV: the interval (µs), the burst, the horizon (µs). Returns the µs
/// until the reserved start (0: now), or, with none free within the
/// horizon, `-1 - <µs until one is>` (nothing reserved).
static RESERVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r#"{GCRA_PRELUDE}
local at = tat + interval - window
if at < now then at = now end
local wait = at - now
if wait > tonumber(ARGV[3]) then
  return -1 - wait
end
tat = tat + interval
{GCRA_STORE}
return wait
"#
    ))
});

/// The interval between two tokens of `limit`, in µs.
fn interval_us(limit: &RateLimit) -> u64 {
    let per_us = u64::try_from(limit.per().as_micros()).unwrap_or(u64::MAX);
    per_us.div_ceil(u64::from(limit.n().max(1))).max(1)
}

#[async_trait]
impl RateLimiter for RedisBackend {
    /// One script on `<prefix>:rate:{<topic>}:<n>-<per_ms>-<burst>`: the
    /// generic cell rate algorithm on the server's clock (`TIME`), so the
    /// bound is the token bucket's own (at most `rate·T + burst` grants in
    /// any window `T`) and the clients' clocks do not matter. A grant is
    /// good for one burst's worth of time: a listener starts its tokens
    /// within it or drops them, so starts stay within `rate·T + 2·burst`.
    /// Exact while the primary keeps its writes (a failover that loses
    /// the key starts the bucket full again).
    ///
    /// It asks for at least a quarter of the burst, as core's claim-based
    /// limiter takes a chunk of a slice: a listener under a limit that
    /// does not bite then runs one script per quarter burst, not one per
    /// fetch.
    async fn take(&self, bucket: &Topic, limit: &RateLimit, want: u32) -> Result<Grant> {
        self.inner.ensure_open()?;
        let ask = want.max(limit.burst() / 4).clamp(1, limit.burst());
        let interval = interval_us(limit);
        let key = format!(
            "{}:rate:{{{bucket}}}:{}-{}-{}",
            self.inner.config.key_prefix,
            limit.n(),
            limit.per().as_millis(),
            limit.burst()
        );
        let (granted, wait_us): (u32, u64) = TAKE
            .key(key)
            .arg(interval)
            .arg(limit.burst())
            .arg(ask)
            .invoke_async(&mut self.inner.conn())
            .await
            .map_err(error::command("rate limit script"))?;
        Ok(Grant {
            tokens: granted,
            usable_for: Duration::from_micros(interval.saturating_mul(u64::from(limit.burst())))
                .max(Duration::from_millis(10)),
            retry_after: Duration::from_micros(wait_us),
        })
    }

    /// One script on `<prefix>:rkey:{<topic>}:<n>-<per_ms>-<burst>:<key>`:
    /// the key's own GCRA bucket on the server's clock, moved one token
    /// on per reservation, so no start is handed out twice.
    async fn reserve(
        &self,
        topic: &Topic,
        key: &str,
        limit: &RateLimit,
        horizon: Duration,
    ) -> Result<Reservation> {
        self.inner.ensure_open()?;
        let bucket = format!(
            "{}:rkey:{{{topic}}}:{}-{}-{}:{key}",
            self.inner.config.key_prefix,
            limit.n(),
            limit.per().as_millis(),
            limit.burst()
        );
        let wait_us: i64 = RESERVE
            .key(bucket)
            .arg(interval_us(limit))
            .arg(limit.burst())
            .arg(u64::try_from(horizon.as_micros()).unwrap_or(u64::MAX))
            .invoke_async(&mut self.inner.conn())
            .await
            .map_err(error::command("rate limit reservation script"))?;
        Ok(if wait_us >= 0 {
            Reservation::Start(Duration::from_micros(wait_us.unsigned_abs()))
        } else {
            Reservation::Later(Duration::from_micros((-1 - wait_us).unsigned_abs()))
        })
    }
}
