//! The task behind one crontab in one client: wait for each tick, claim it
//! through the backend's [`ExclusiveClaim`](ezmq_core::spi::ExclusiveClaim),
//! run the handler when the claim is won.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use chrono::{DateTime, Utc};
use ezmq_core::spi::{Backend, Capability};
use ezmq_core::{BoxError, Error, Topic};
use futures::FutureExt;
use tokio::task::{Id, JoinError, JoinSet};
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{debug, error, info, warn, Instrument, Span};

use crate::history::{self, CronRun, RunOutcome};
use crate::options::{CrontabOptions, MissedTicks};
use crate::run_claim::{self, RunClaim, Taken};
use crate::spec::CronSpec;
use crate::telemetry::{self, tick_span, LOST, MISSED, RUN, SKIPPED};
use crate::timing::{claim_hold, claim_window, MIN_HOLD};

/// The `kind` of the internal claim topics: `__ezmq|cron|<name>|<unix secs>`.
pub(crate) const CLAIM_KIND: &str = "cron";

/// A claim call gets at least this long, even when the claim window is
/// shorter: abandoning a call that the broker may have executed loses the
/// tick for every participant.
const MIN_CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// Longest sleep before re-reading the wall clock (follows clock changes).
const MAX_NAP: Duration = Duration::from_secs(60);

/// A type-erased tick handler.
pub(crate) type BoxHandler = Arc<
    dyn Fn(DateTime<Utc>) -> Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>
        + Send
        + Sync,
>;

/// The claim key of `tick` of crontab `name`.
pub(crate) fn claim_key(name: &str, tick: DateTime<Utc>) -> ezmq_core::Result<Topic> {
    Topic::internal(CLAIM_KIND, &[name, &tick.timestamp().to_string()])
}

/// One crontab's schedule in one client.
pub(crate) struct Scheduler {
    /// The client's backend (not the client: a crontab never keeps its
    /// client alive). Its exclusive claim was checked at registration.
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) name: Arc<str>,
    pub(crate) spec: Arc<CronSpec>,
    pub(crate) options: CrontabOptions,
    pub(crate) handler: BoxHandler,
    pub(crate) cancel: CancellationToken,
    /// Tells the crontab's announcer (see [`crate::announce`]) each tick
    /// this participant won.
    pub(crate) announce: tokio::sync::watch::Sender<Option<DateTime<Utc>>>,
    /// Cancels the registry's `stopped` token when dropped: once no run can
    /// start any more (also when the task is dropped unpolled).
    pub(crate) stopped: Option<DropGuard>,
    /// `host/pid`, for the run claim.
    pub(crate) participant: String,
    /// Shows the crontab as running here (`ezmq cron list`) while the
    /// scheduler lives, with the last tick it ran.
    pub(crate) presence: ezmq_core::presence::PresenceGuard,
}

enum Claim {
    Won,
    Lost,
    Failed(Error),
    Cancelled,
}

impl Scheduler {
    /// Runs the schedule until cancelled, then waits for the runs in
    /// progress.
    pub(crate) async fn run(mut self) {
        let mut runs = Runs {
            name: Arc::clone(&self.name),
            backend: Arc::clone(&self.backend),
            participant: Arc::from(self.participant.as_str()),
            history: self.options.history,
            set: JoinSet::new(),
            runs: HashMap::new(),
        };
        self.schedule(&mut runs).await;
        drop(self.stopped.take());
        if runs.is_busy() {
            info!(cron = %self.name, "schedule stopped; waiting for the run in progress");
        }
        runs.drain().await;
        debug!(cron = %self.name, "schedule stopped");
    }

    async fn schedule(&self, runs: &mut Runs) {
        if self.options.missed_ticks == MissedTicks::RunOnce && !self.catch_up(runs).await {
            return;
        }
        let Some(mut tick) = self.spec.next_after(Utc::now()) else {
            info!(cron = %self.name, "the schedule has no upcoming tick");
            return;
        };
        loop {
            if !self.wait_until(tick, runs).await {
                return;
            }
            let period = self.spec.gap_after(tick).unwrap_or(MIN_HOLD);
            let window = claim_window(period);
            let deadline = tick + to_chrono(window);
            let span = tick_span(self.backend.name(), &self.name, tick);
            let now = Utc::now();
            if now > deadline {
                // Asleep (suspended, starved) past the claim window: the
                // tick is left to the other participants.
                let resume = self.spec.next_after(now - to_chrono(window));
                telemetry::tick(self.backend.name(), &self.name, MISSED);
                warn!(parent: &span, cron = %self.name, %tick, late_ms = (now - tick).num_milliseconds(), next = ?resume,
                    "woke up after the claim window; skipping the tick here");
                match resume {
                    Some(next) => tick = next,
                    None => return,
                }
                continue;
            }
            runs.reap_ready();
            if !self.options.allow_overlap && runs.is_busy() {
                telemetry::tick(self.backend.name(), &self.name, SKIPPED);
                warn!(parent: &span, cron = %self.name, %tick, "the previous run is still in progress; skipping the tick here (allow_overlap is off)");
            } else {
                match self
                    .claim(tick, claim_hold(period), deadline)
                    .instrument(span.clone())
                    .await
                {
                    Claim::Won => {
                        if let Some(guard) = self.run_guard(tick, &span).await {
                            telemetry::tick(self.backend.name(), &self.name, RUN);
                            self.ran(tick);
                            runs.start(tick, &self.handler, span, guard);
                        }
                    }
                    Claim::Lost => {
                        telemetry::tick(self.backend.name(), &self.name, LOST);
                        debug!(parent: &span, "another participant claimed the tick");
                    }
                    Claim::Failed(e) => {
                        telemetry::tick(self.backend.name(), &self.name, SKIPPED);
                        warn!(parent: &span, cron = %self.name, %tick, cause = %e, "could not claim the tick; skipping it");
                    }
                    Claim::Cancelled => return,
                }
            }
            match self.spec.next_after(tick) {
                Some(next) => tick = next,
                None => {
                    info!(cron = %self.name, "the schedule has no more ticks");
                    return;
                }
            }
        }
    }

    /// [`MissedTicks::RunOnce`]: claims the most recent past tick and runs
    /// it when won. Returns `false` when cancelled.
    async fn catch_up(&self, runs: &mut Runs) -> bool {
        let now = Utc::now();
        let Some(last) = self.spec.last_at_or_before(now) else {
            return true;
        };
        let period = self.spec.gap_after(last).unwrap_or(MIN_HOLD);
        let hold = claim_hold(period);
        let span = tick_span(self.backend.name(), &self.name, last);
        let age = (now - last).to_std().unwrap_or_default();
        if let Some(window) = self.options.catch_up_window.filter(|w| age > *w) {
            telemetry::tick(self.backend.name(), &self.name, MISSED);
            info!(parent: &span, cron = %self.name, tick = %last, ?age, ?window,
                "the most recent tick is older than the catch-up window; not catching up");
            return true;
        }
        if age > hold / 2 {
            telemetry::tick(self.backend.name(), &self.name, MISSED);
            warn!(parent: &span, cron = %self.name, tick = %last, ?age, ?hold,
                "the most recent tick is too old to tell whether it ran; not catching up");
            return true;
        }
        let deadline = now + to_chrono(claim_window(period));
        match self
            .claim(last, hold, deadline)
            .instrument(span.clone())
            .await
        {
            Claim::Won => {
                if let Some(guard) = self.run_guard(last, &span).await {
                    telemetry::tick(self.backend.name(), &self.name, RUN);
                    info!(parent: &span, "catching up the most recent tick");
                    self.ran(last);
                    runs.start(last, &self.handler, span, guard);
                }
            }
            Claim::Lost => debug!(parent: &span, "the most recent tick was already claimed"),
            Claim::Failed(e) => {
                warn!(parent: &span, cron = %self.name, tick = %last, cause = %e, "could not claim the most recent tick; not catching up");
            }
            Claim::Cancelled => return false,
        }
        true
    }

    /// The overlap policy for a won `tick`: `Some` when it may run (with
    /// the run claim it holds, none when overlap is allowed); `None` when
    /// it is skipped (logged).
    async fn run_guard(&self, tick: DateTime<Utc>, span: &Span) -> Option<Option<RunClaim>> {
        if self.options.allow_overlap {
            return Some(None);
        }
        let taken = run_claim::take(
            &*self.backend,
            &self.name,
            tick,
            &self.participant,
            self.options.max_run,
        )
        .await;
        match taken {
            Ok(Taken::Ours(claim)) => Some(Some(claim)),
            Ok(Taken::Busy(holder)) => {
                telemetry::tick(self.backend.name(), &self.name, SKIPPED);
                warn!(parent: span, cron = %self.name, %tick, running = holder.as_deref().unwrap_or("unknown"),
                    "the run of an earlier tick is still going elsewhere; skipping the tick (allow_overlap is off)");
                None
            }
            Err(e) => {
                telemetry::tick(self.backend.name(), &self.name, SKIPPED);
                warn!(parent: span, cron = %self.name, %tick, cause = %e,
                    "could not take the run claim; skipping the tick (allow_overlap is off)");
                None
            }
        }
    }

    /// Sleeps until the wall clock reaches `tick`, reaping finished runs.
    /// Returns `false` when cancelled.
    async fn wait_until(&self, tick: DateTime<Utc>, runs: &mut Runs) -> bool {
        loop {
            if self.cancel.is_cancelled() {
                return false;
            }
            let now = Utc::now();
            if now >= tick {
                return true;
            }
            let nap = (tick - now).to_std().unwrap_or_default().min(MAX_NAP);
            tokio::select! {
                _ = self.cancel.cancelled() => return false,
                Some(result) = runs.set.join_next_with_id(), if runs.is_busy() => runs.finished(result),
                _ = tokio::time::sleep(nap) => {}
            }
        }
    }

    /// Tries to claim `tick`, retrying failed calls until `deadline`. A call
    /// in progress is never abandoned because of cancellation.
    /// This participant won `tick` and runs it: tells the announcer, and
    /// puts it in the presence entry (what `cron list` shows on a broker
    /// that cannot peek).
    fn ran(&self, tick: DateTime<Utc>) {
        self.announce.send_replace(Some(tick));
        self.presence.set_detail(
            crate::announce::LAST_TICK_DETAIL,
            tick.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        );
    }

    async fn claim(&self, tick: DateTime<Utc>, hold: Duration, deadline: DateTime<Utc>) -> Claim {
        let key = match claim_key(&self.name, tick) {
            Ok(key) => key,
            Err(e) => return Claim::Failed(e),
        };
        let mut backoff = Duration::from_millis(50);
        let mut attempt = 1u32;
        loop {
            let remaining = (deadline - Utc::now()).to_std().unwrap_or_default();
            let limit = remaining.max(MIN_CALL_TIMEOUT);
            let Some(claims) = self.backend.exclusive_claim() else {
                return Claim::Failed(Error::Unsupported {
                    backend: self.backend.name(),
                    capability: Capability::ExclusiveClaim,
                });
            };
            let err = match tokio::time::timeout(limit, claims.try_claim(&key, hold)).await {
                Ok(Ok(true)) => return Claim::Won,
                Ok(Ok(false)) => return Claim::Lost,
                Ok(Err(e)) => e,
                Err(_) => Error::Timeout(limit),
            };
            let next_try = Utc::now() + to_chrono(backoff);
            if !err.is_retryable() || next_try >= deadline {
                return Claim::Failed(err);
            }
            debug!(attempt, cause = %err, "claim failed; retrying");
            tokio::select! {
                _ = self.cancel.cancelled() => return Claim::Cancelled,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_millis(500));
            attempt += 1;
        }
    }
}

/// The handler runs of one crontab. They are owned by the scheduler task
/// (itself spawned on the client's runtime), which waits for them before it
/// ends, so client shutdown waits for them too.
struct Runs {
    /// The crontab's name, for log events.
    name: Arc<str>,
    /// Where run claims are given back and runs recorded.
    backend: Arc<dyn Backend>,
    /// `host/pid`, for the run's record.
    participant: Arc<str>,
    /// Runs the history keeps.
    history: usize,
    set: JoinSet<()>,
    /// Span and tick of each run, for logging its panic.
    runs: HashMap<Id, (Span, DateTime<Utc>)>,
}

impl Runs {
    fn is_busy(&self) -> bool {
        !self.set.is_empty()
    }

    /// Runs the handler for `tick`, then gives `claim` back (also when the
    /// handler panicked).
    fn start(
        &mut self,
        tick: DateTime<Utc>,
        handler: &BoxHandler,
        span: Span,
        claim: Option<RunClaim>,
    ) {
        let handler = Arc::clone(handler);
        let name = Arc::clone(&self.name);
        let backend = Arc::clone(&self.backend);
        let (participant, keep) = (Arc::clone(&self.participant), self.history);
        let run = async move {
            let started = Instant::now();
            let started_at = SystemTime::now();
            let outcome = AssertUnwindSafe(handler(tick)).catch_unwind().await;
            if let Some(claim) = claim {
                claim.give_back(&backend, &name).await;
            }
            let (ended, error) = match outcome {
                Ok(Ok(())) => {
                    debug!(elapsed = ?started.elapsed(), "tick handled");
                    (RunOutcome::Succeeded, None)
                }
                Ok(Err(e)) => {
                    telemetry::handler_failed();
                    error!(cron = %name, %tick, elapsed = ?started.elapsed(), cause = %e,
                        "tick handler failed");
                    (RunOutcome::Failed, Some(e.to_string()))
                }
                Err(panic) => {
                    telemetry::handler_failed();
                    let message = ezmq_core::spi::panic_message(&*panic).to_owned();
                    error!(cron = %name, %tick, elapsed = ?started.elapsed(),
                        cause = %message, "tick handler panicked");
                    (RunOutcome::Panicked, Some(message))
                }
            };
            let record = CronRun::ended(tick, &participant, started_at, ended, error);
            history::record(&*backend, &name, &record, keep).await;
        }
        .instrument(span.clone());
        let task = self.set.spawn(run);
        self.runs.insert(task.id(), (span, tick));
    }

    fn reap_ready(&mut self) {
        while let Some(result) = self.set.try_join_next_with_id() {
            self.finished(result);
        }
    }

    fn finished(&mut self, result: Result<(Id, ()), JoinError>) {
        match result {
            Ok((id, ())) => {
                self.runs.remove(&id);
            }
            Err(e) => {
                let Some((span, tick)) = self.runs.remove(&e.id()) else {
                    error!(cron = %self.name, cause = %e, "tick handler task failed");
                    return;
                };
                if e.is_panic() {
                    error!(parent: &span, cron = %self.name, %tick, "tick handler panicked");
                } else {
                    warn!(parent: &span, cron = %self.name, %tick, "tick handler was cancelled");
                }
            }
        }
    }

    async fn drain(&mut self) {
        while let Some(result) = self.set.join_next_with_id().await {
            self.finished(result);
        }
    }
}

/// Converts the short durations used here (claim windows, backoffs: at most
/// a minute) for wall-clock arithmetic.
fn to_chrono(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or_else(|_| chrono::Duration::zero())
}
