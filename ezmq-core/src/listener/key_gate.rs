//! The per-key rate-limit step
//! ([`ConsumeOptions::rate_limit_by`](crate::ConsumeOptions::rate_limit_by)):
//! after a fetch, before any handler starts, each job whose key is over
//! its limit is deferred to the start reserved for it.
//!
//! A key is inside its job, so this cannot come before the fetch as the
//! other limits do (see [`admission`](super::admission)). For each
//! fetched job with a key:
//!
//! - a job that comes back from a deferral as the same attempt, at or
//!   after its reserved start (the
//!   [`RESERVATION_HEADER`]), starts;
//! - otherwise it reserves its key's next start — in the backend's own
//!   [`RateLimiter`](crate::spi::RateLimiter), or in core's claims
//!   ([`claim_keys`](crate::flow::claim_keys)). A start due within
//!   [`SHORT_WAIT`] is awaited here (the job keeps its slot that long);
//!   a later one defers the job to it
//!   ([`Settle::defer`](crate::spi::Settle::defer): no attempt counted);
//! - a key with no start free within the horizon defers the job past it,
//!   spaced one interval after the last such job of the key, so a
//!   backlog comes back at about the key's own rate and reserves then.
//!
//! Deferrals of one fetch go out together; their slots are free for the
//! next fetch as soon as they are answered.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::flow::claim_keys::ClaimKeyLimiter;
use crate::flow::unix_millis;
use crate::job::Job;
use crate::job_meta::RESERVATION_HEADER;
use crate::rate_key::{key_hash, KeyedRateLimit};
use crate::spi::{Capability, Delivery, Reservation};

use super::Ctx;

/// A reserved start this close is awaited in the listener rather than
/// deferred through the broker (a round trip and a redelivery).
pub(super) const SHORT_WAIT: Duration = Duration::from_millis(25);

/// A reservation up to this far ahead of the local clock is honoured
/// anyway (another process reserved it, on a clock a little ahead).
const CLOCK_SLACK_MS: u64 = 50;

/// Keys whose past-the-horizon spacing is tracked at once.
const MAX_SPACED_KEYS: usize = 4096;

/// What the step decided for the jobs of one fetch.
pub(super) struct Sorted {
    /// The jobs to start, in fetch order.
    pub(super) start: Vec<Delivery>,
    /// How long each job of `start` waits first (all zero, or empty, for
    /// most fetches).
    pub(super) waits: Vec<Duration>,
}

/// One listener's per-key step.
pub(super) struct KeyGate {
    rule: KeyedRateLimit,
    claims: ClaimKeyLimiter,
    /// Per key hash: when the last job deferred past the horizon comes
    /// back (ms since the epoch).
    spaced: HashMap<String, u64>,
}

impl KeyGate {
    /// The step of a listener with a per-key limit; `None` without one.
    pub(super) fn new(ctx: &Ctx) -> Option<Self> {
        Some(KeyGate {
            rule: ctx.options.rate_limit_by.clone()?,
            claims: ClaimKeyLimiter::new(),
            spaced: HashMap::new(),
        })
    }

    /// Sorts a fetch into jobs that start (each with its short wait) and
    /// jobs deferred to their key's reserved start.
    pub(super) async fn sort(&mut self, ctx: &Ctx, fetched: Vec<Delivery>) -> Sorted {
        let mut start = Vec::with_capacity(fetched.len());
        let mut waits = Vec::with_capacity(fetched.len());
        let mut deferred = Vec::new();
        let mut failed = Vec::new();
        for delivery in fetched {
            let Some(key) = self.rule.key.of(&delivery.job).map(key_hash) else {
                start.push(delivery);
                waits.push(Duration::ZERO);
                continue;
            };
            let now = unix_millis();
            if holds_reservation(&delivery.job, now) {
                start.push(delivery);
                waits.push(Duration::ZERO);
                continue;
            }
            match self.reserve(ctx, &key, now).await {
                Ok(Reservation::Start(wait)) if wait <= SHORT_WAIT => {
                    start.push(delivery);
                    waits.push(wait);
                }
                Ok(Reservation::Start(wait)) => {
                    let at = now.saturating_add(millis(wait));
                    let mark = format!("{}:{at}", delivery.job.attempt());
                    deferred.push((delivery, wait, Some(mark)));
                }
                Ok(Reservation::Later(after)) => {
                    let wait = self.spaced_wait(&key, now, after);
                    deferred.push((delivery, wait, None));
                }
                Err(err) => failed.push((delivery, err)),
            }
        }
        if !deferred.is_empty() {
            ctx.held_back.store(true, Ordering::Relaxed);
        }
        defer_all(deferred).await;
        give_back(failed).await;
        Sorted { start, waits }
    }

    async fn reserve(&mut self, ctx: &Ctx, key: &str, now: u64) -> Result<Reservation> {
        let topic = ctx.source.topic();
        let horizon = self.rule.horizon();
        if let Some(limiter) = ctx.backend.rate_limiter() {
            return limiter.reserve(topic, key, &self.rule.limit, horizon).await;
        }
        let claims = ctx
            .backend
            .exclusive_claim()
            .ok_or_else(|| Error::Unsupported {
                backend: ctx.backend.name(),
                capability: Capability::RateLimitByKey,
            })?;
        self.claims
            .reserve(claims, topic, key, &self.rule.limit, horizon, now)
            .await
    }

    /// How long a job of `key` with no start free waits: until `after`,
    /// and one interval of the key's limit past the key's last such job.
    fn spaced_wait(&mut self, key: &str, now: u64, after: Duration) -> Duration {
        if self.spaced.len() >= MAX_SPACED_KEYS {
            self.spaced.retain(|_, back| *back > now);
        }
        let interval =
            (self.rule.limit.per_millis() / u64::from(self.rule.limit.n().max(1))).max(1);
        let earliest = now.saturating_add(millis(after));
        let last = self.spaced.entry(key.to_owned()).or_default();
        let back = (*last + interval).max(earliest);
        *last = back;
        Duration::from_millis(back - now)
    }
}

/// True when `job` came back from a deferral as the attempt it was
/// deferred as, with its reserved start reached (give or take the
/// clocks' slack). A promoted deferral (its start still ahead) or a
/// retry (a later attempt) reserves again.
fn holds_reservation(job: &Job, now: u64) -> bool {
    let Some(mark) = job.headers().get(RESERVATION_HEADER) else {
        return false;
    };
    let Some((attempt, at)) = mark.split_once(':') else {
        return false;
    };
    attempt.parse::<u32>().ok() == Some(job.attempt())
        && at
            .parse::<u64>()
            .is_ok_and(|at| at <= now.saturating_add(CLOCK_SLACK_MS))
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Hands each job back to come again after its wait, all at once.
async fn defer_all(deferred: Vec<(Delivery, Duration, Option<String>)>) {
    let results = futures::future::join_all(
        deferred
            .iter()
            .map(|(delivery, wait, mark)| delivery.handle.defer(*wait, mark.as_deref())),
    )
    .await;
    for ((delivery, wait, _), result) in deferred.iter().zip(results) {
        let job = &delivery.job;
        match result {
            Ok(()) => tracing::debug!(
                topic = %job.topic(),
                message_id = %job.id(),
                attempt = job.attempt(),
                defer_for = ?wait,
                "job deferred by its key's rate limit"
            ),
            Err(err) => tracing::warn!(
                topic = %job.topic(),
                message_id = %job.id(),
                attempt = job.attempt(),
                cause = %err,
                "could not defer a job over its key's rate limit; the broker redelivers it when its lease ends"
            ),
        }
    }
}

/// Gives back the jobs whose start could not be reserved (the broker
/// failed): they come again, and reserve then.
async fn give_back(failed: Vec<(Delivery, Error)>) {
    if failed.is_empty() {
        return;
    }
    for (delivery, err) in &failed {
        tracing::warn!(
            topic = %delivery.job.topic(),
            message_id = %delivery.job.id(),
            attempt = delivery.job.attempt(),
            cause = %err,
            "could not reserve a start for the job's key; giving it back"
        );
    }
    let deliveries = failed.into_iter().map(|(delivery, _)| delivery).collect();
    super::run_loop::give_back(deliveries, "no start reserved for its key").await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobId;
    use crate::topic::Topic;
    use crate::Headers;

    fn job_with(mark: Option<&str>) -> Job {
        let mut headers = Headers::new();
        if let Some(mark) = mark {
            headers.insert(RESERVATION_HEADER, mark.to_owned());
        }
        Job::new(JobId::new("j"), Topic::new("t").unwrap(), "x".into()).with_headers(headers)
    }

    #[test]
    fn a_reservation_holds_for_its_attempt_once_due() {
        let now = 1_000_000;
        assert!(holds_reservation(&job_with(Some("1:1000000")), now));
        assert!(
            holds_reservation(&job_with(Some("1:1000040")), now),
            "clock slack"
        );
        assert!(
            !holds_reservation(&job_with(Some("1:1000500")), now),
            "promoted early"
        );
        assert!(
            !holds_reservation(&job_with(Some("2:999000")), now),
            "another attempt"
        );
        assert!(!holds_reservation(&job_with(Some("junk")), now));
        assert!(!holds_reservation(&job_with(None), now));
    }
}
