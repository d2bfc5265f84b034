//! The rate-limit step of admission
//! ([`ConsumeOptions::rate_limit`](crate::ConsumeOptions::rate_limit)):
//! a fetch asks for no more jobs than the listener holds tokens of its
//! topic's cluster-wide bucket.
//!
//! The listener keeps the tokens it took in a small reservoir and takes
//! more only when it is empty: from the backend's own
//! [`RateLimiter`](crate::spi::RateLimiter), or else from core's, kept in
//! claims ([`claim_rate`](crate::flow::claim_rate)). Tokens are good for
//! a while only ([`Grant::usable_for`]); a fetch waits no longer than its
//! tokens last, and jobs a fetch brings after that (a broker slow to
//! answer) wait for fresh tokens, so no job starts on a token past its
//! time. Tokens a fetch
//! did not use (it returned fewer jobs) stay for the next one, and the
//! next take then asks for one token only: an idle listener does not sit
//! on the tokens busy listeners of other processes could use.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::error::Result;
use crate::flow::claim_rate::ClaimRateLimiter;
use crate::rate_limit::RateLimit;
use crate::spi::{Capability, Grant};

use super::backoff::FetchBackoff;
use super::Ctx;

/// The shortest fetch wait the gate asks for (the shortest
/// [`ConsumeOptions::fetch_wait`](crate::ConsumeOptions::fetch_wait)).
const MIN_FETCH_WAIT: Duration = Duration::from_millis(10);

/// One listener's tokens.
pub(super) struct RateGate {
    limit: RateLimit,
    claims: ClaimRateLimiter,
    tokens: u32,
    usable_until: Instant,
    /// Until when the tokens of the last fetch's admission were good.
    admitted_until: Instant,
    /// The last fetch returned fewer jobs than it had tokens for.
    probing: bool,
    errors: FetchBackoff,
}

impl RateGate {
    /// The gate of a listener with a rate limit; `None` without one.
    pub(super) fn new(ctx: &Ctx) -> Option<Self> {
        Some(RateGate {
            limit: ctx.options.rate_limit?,
            claims: ClaimRateLimiter::new(),
            tokens: 0,
            usable_until: Instant::now(),
            admitted_until: Instant::now(),
            probing: false,
            errors: FetchBackoff::new(&ctx.options.fetch_error_backoff),
        })
    }

    /// Trims `permits` to the tokens the listener holds, taking more
    /// first when it holds none (waiting while the bucket is empty), and
    /// returns how long the fetch may wait. `None` once the listener is
    /// stopping.
    pub(super) async fn admit(
        &mut self,
        ctx: &Ctx,
        permits: &mut Vec<OwnedSemaphorePermit>,
    ) -> Option<Duration> {
        let want = if self.probing {
            1
        } else {
            u32::try_from(permits.len()).unwrap_or(u32::MAX)
        };
        self.refill(ctx, want).await?;
        permits.truncate(self.tokens as usize);
        self.tokens -= u32::try_from(permits.len()).unwrap_or(self.tokens);
        self.admitted_until = self.usable_until;
        let left = self.usable_until.saturating_duration_since(Instant::now());
        Some(ctx.options.fetch_wait.min(left).max(MIN_FETCH_WAIT))
    }

    /// After a fetch: when its `jobs` arrived after the tokens they were
    /// fetched on ran out (a fetch answered late, a slow broker), they
    /// wait for tokens of their own before they start, so the limit holds
    /// at the handlers, not only at the fetch. Returns at once otherwise.
    /// `None` once the listener is stopping.
    pub(super) async fn cover_late(&mut self, ctx: &Ctx, jobs: usize) -> Option<()> {
        if jobs == 0 || Instant::now() < self.admitted_until {
            return Some(());
        }
        tracing::trace!(
            topic = %ctx.source.topic(),
            jobs,
            "fetched jobs arrived after their tokens ran out; taking fresh ones"
        );
        let mut need = u32::try_from(jobs).unwrap_or(u32::MAX);
        while need > 0 {
            self.refill(ctx, need).await?;
            let used = self.tokens.min(need);
            self.tokens -= used;
            need -= used;
        }
        Some(())
    }

    /// Returns once the listener holds tokens it may still use, taking up
    /// to `want` more when it holds none (waiting while the bucket is
    /// empty). `None` once the listener is stopping.
    async fn refill(&mut self, ctx: &Ctx, want: u32) -> Option<()> {
        loop {
            let now = Instant::now();
            if self.tokens > 0 && now < self.usable_until {
                return Some(());
            }
            self.tokens = 0;
            let wait = match self.take(ctx, want.max(1)).await {
                Ok(grant) => {
                    self.errors.reset();
                    if grant.tokens > 0 {
                        self.tokens = grant.tokens;
                        self.usable_until = now + grant.usable_for;
                        continue;
                    }
                    tracing::trace!(
                        topic = %ctx.source.topic(),
                        retry_after = ?grant.retry_after,
                        "rate limit reached; waiting"
                    );
                    grant.retry_after
                }
                Err(err) => {
                    let delay = self.errors.next_delay();
                    tracing::warn!(
                        topic = %ctx.source.topic(),
                        cause = %err,
                        retry_in = ?delay,
                        "could not take rate-limit tokens; fetching nothing until it can"
                    );
                    delay
                }
            };
            if !wait.is_zero() {
                ctx.held_back.store(true, Ordering::Relaxed);
                tokio::select! {
                    biased;
                    () = ctx.control.stopping() => return None,
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }

    /// After a fetch that asked for `asked` jobs and got `got`: the tokens
    /// it did not use stay for the next fetch.
    pub(super) fn fetched(&mut self, asked: usize, got: usize) {
        let unused = asked.saturating_sub(got);
        self.tokens = self
            .tokens
            .saturating_add(u32::try_from(unused).unwrap_or(u32::MAX));
        self.probing = unused > 0;
    }

    async fn take(&mut self, ctx: &Ctx, want: u32) -> Result<Grant> {
        let bucket = ctx.source.topic();
        if let Some(limiter) = ctx.backend.rate_limiter() {
            return limiter.take(bucket, &self.limit, want).await;
        }
        let claims = ctx
            .backend
            .exclusive_claim()
            .ok_or_else(|| crate::Error::Unsupported {
                backend: ctx.backend.name(),
                capability: Capability::RateLimit,
            })?;
        self.claims.take(claims, bucket, &self.limit, want).await
    }
}
