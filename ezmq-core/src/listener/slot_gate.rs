//! The global-concurrency step of admission
//! ([`ConsumeOptions::global_concurrency`](crate::ConsumeOptions::global_concurrency)):
//! a fetch asks for no more jobs than the listener holds free slots of its
//! topic's cluster-wide limit, each a claim renewed epoch by epoch
//! ([`claim_slots`](crate::flow::claim_slots)).
//!
//! The listener keeps the slots it won in a pool. A job takes one as it
//! is admitted ([`GlobalSlot`]) and gives it back to the pool when its
//! handler returns; the pool's renewal ticker claims the next epoch of
//! every slot in use or used during this epoch, and lets the others lapse,
//! so slots a listener no longer needs go back to the cluster within an
//! epoch or two. With no free slot, the listener probes for unclaimed ones
//! (backing off from 50 ms to 1 s while every slot is taken) and wakes as
//! soon as one of its own comes back.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::flow::claim_slots::Epochs;
use crate::flow::unix_millis;
use crate::spi::{Backend, Capability, ExclusiveClaim};
use crate::topic::Topic;

use super::Ctx;

/// First wait between probes while every slot is taken.
const PROBE_BACKOFF_MIN: Duration = Duration::from_millis(50);
/// Longest wait between probes.
const PROBE_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// One listener's slots of its topic.
pub(crate) struct SlotPool {
    backend: Arc<dyn Backend>,
    bucket: Topic,
    limit: u32,
    epochs: Epochs,
    state: Mutex<State>,
    /// A slot came back to the pool.
    freed: Notify,
}

#[derive(Default)]
struct State {
    slots: BTreeMap<u32, Held>,
    backoff: Option<Duration>,
    next_probe: Option<Instant>,
}

/// A slot this listener won.
#[derive(Clone, Copy)]
struct Held {
    /// The last epoch claimed: the slot may be used until it ends.
    through: u64,
    in_use: bool,
    /// The last epoch a job took it in.
    used_in: u64,
    /// Another process won its next epoch: it lapses when this one ends.
    lost: bool,
}

/// A slot a job holds while its handler runs; back to the pool on drop.
pub(crate) struct GlobalSlot {
    pool: Arc<SlotPool>,
    index: u32,
}

impl Drop for GlobalSlot {
    fn drop(&mut self) {
        if let Some(held) = self.pool.lock().slots.get_mut(&self.index) {
            held.in_use = false;
        }
        self.pool.freed.notify_one();
    }
}

impl SlotPool {
    /// The pool of a listener with a global concurrency limit; `None`
    /// without one.
    pub(super) fn new(ctx: &Ctx) -> Option<Arc<Self>> {
        Some(Arc::new(SlotPool {
            backend: Arc::clone(&ctx.backend),
            bucket: ctx.source.topic().clone(),
            limit: ctx.options.global_concurrency?,
            epochs: Epochs::of(ctx.options.slot_lease),
            state: Mutex::new(State::default()),
            freed: Notify::new(),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn claims(&self) -> Result<&dyn ExclusiveClaim> {
        self.backend
            .exclusive_claim()
            .ok_or_else(|| Error::Unsupported {
                backend: self.backend.name(),
                capability: Capability::GlobalConcurrency,
            })
    }

    /// Trims `permits` to the free slots the listener holds, winning more
    /// first when it holds none (waiting while every slot is taken); one
    /// slot per remaining permit. `None` once the listener is stopping.
    pub(super) async fn admit(
        self: &Arc<Self>,
        ctx: &Ctx,
        permits: &mut Vec<OwnedSemaphorePermit>,
    ) -> Option<Vec<GlobalSlot>> {
        loop {
            let now_ms = unix_millis();
            let taken = self.take_free(now_ms, permits.len());
            if !taken.is_empty() {
                permits.truncate(taken.len());
                return Some(taken);
            }
            let wait = match self.probe(ctx, now_ms, permits.len()).await {
                Ok(0) => self.next_probe_wait(),
                Ok(_) => continue,
                Err(err) => {
                    tracing::warn!(
                        topic = %self.bucket,
                        cause = %err,
                        "could not claim a global concurrency slot; fetching nothing until it can"
                    );
                    self.next_probe_wait()
                }
            };
            ctx.held_back.store(true, Ordering::Relaxed);
            tokio::select! {
                biased;
                () = ctx.control.stopping() => return None,
                () = self.freed.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Marks up to `max` free slots in use: those claimed for a later
    /// epoch, and those of this epoch until its last quarter (by then a
    /// slot in use has been renewed; one that was not is left to lapse,
    /// since a job started on it could outlive its claim).
    fn take_free(self: &Arc<Self>, now_ms: u64, max: usize) -> Vec<GlobalSlot> {
        let epoch = self.epochs.epoch(now_ms);
        let late = self.epochs.is_late(now_ms);
        let mut state = self.lock();
        state
            .slots
            .retain(|_, held| held.through >= epoch || held.in_use);
        let mut taken = Vec::new();
        for (index, held) in &mut state.slots {
            if taken.len() == max {
                break;
            }
            let valid = held.through > epoch || (held.through == epoch && !late);
            if !held.in_use && valid {
                held.in_use = true;
                held.used_in = epoch;
                taken.push(GlobalSlot {
                    pool: Arc::clone(self),
                    index: *index,
                });
            }
        }
        taken
    }

    /// Claims up to `want` slots nobody holds in this epoch, when a probe
    /// is due: how many it won.
    async fn probe(&self, ctx: &Ctx, now_ms: u64, want: usize) -> Result<usize> {
        let epoch = self.epochs.epoch(now_ms);
        let candidates: Vec<u32> = {
            let state = self.lock();
            if state.next_probe.is_some_and(|at| Instant::now() < at) {
                return Ok(0);
            }
            if !self.epochs.may_join(now_ms) {
                drop(state);
                self.lock().next_probe = Some(Instant::now() + self.epochs.until_join(now_ms));
                return Ok(0);
            }
            let start = rand::random::<u32>() % self.limit;
            (0..self.limit)
                .map(|step| (start + step) % self.limit)
                .filter(|index| !state.slots.contains_key(index))
                .collect()
        };
        let claims = self.claims()?;
        let hold = self.epochs.hold();
        let mut won = 0;
        let mut failure = None;
        for round in candidates.chunks(want.max(1)) {
            let keys = round
                .iter()
                .map(|index| self.epochs.key(&self.bucket, self.limit, *index, epoch))
                .collect::<Result<Vec<_>>>()?;
            let outcomes =
                futures::future::join_all(keys.iter().map(|key| claims.try_claim(key, hold))).await;
            let mut state = self.lock();
            for (index, outcome) in round.iter().zip(outcomes) {
                match outcome {
                    Ok(true) => {
                        won += 1;
                        state.slots.insert(
                            *index,
                            Held {
                                through: epoch,
                                in_use: false,
                                used_in: epoch,
                                lost: false,
                            },
                        );
                    }
                    Ok(false) => {}
                    Err(err) => failure = Some(err),
                }
            }
            if won >= want || ctx.control.is_stopping() {
                break;
            }
        }
        let mut state = self.lock();
        if won > 0 {
            state.backoff = None;
            state.next_probe = None;
        } else {
            let backoff = state
                .backoff
                .map_or(PROBE_BACKOFF_MIN, |b| (b * 2).min(PROBE_BACKOFF_MAX));
            state.backoff = Some(backoff);
            state.next_probe = Some(Instant::now() + backoff);
        }
        drop(state);
        match (won, failure) {
            (0, Some(err)) => Err(err),
            _ => Ok(won),
        }
    }

    /// How long until the next probe.
    fn next_probe_wait(&self) -> Duration {
        let state = self.lock();
        state
            .next_probe
            .map_or(PROBE_BACKOFF_MIN, |at| {
                at.saturating_duration_since(Instant::now())
            })
            .max(Duration::from_millis(1))
    }

    /// The renewal ticker: every eighth of a lease, claims the next epoch
    /// of every slot in use or used in this epoch, once the epoch is half
    /// over. Runs until `finish`.
    pub(super) async fn renew_until(self: Arc<Self>, finish: CancellationToken) {
        let tick = self.epochs.tick();
        loop {
            tokio::select! {
                biased;
                () = finish.cancelled() => return,
                () = tokio::time::sleep(tick) => {}
            }
            if let Err(err) = self.renew(unix_millis()).await {
                tracing::warn!(
                    topic = %self.bucket,
                    cause = %err,
                    "could not renew global concurrency slots; retrying"
                );
            }
        }
    }

    async fn renew(&self, now_ms: u64) -> Result<()> {
        if !self.epochs.renewal_due(now_ms) {
            return Ok(());
        }
        let epoch = self.epochs.epoch(now_ms);
        let due: Vec<u32> = self
            .lock()
            .slots
            .iter()
            .filter(|(_, held)| {
                held.through == epoch && !held.lost && (held.in_use || held.used_in == epoch)
            })
            .map(|(index, _)| *index)
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        let claims = self.claims()?;
        let hold = self.epochs.hold();
        let keys = due
            .iter()
            .map(|index| self.epochs.key(&self.bucket, self.limit, *index, epoch + 1))
            .collect::<Result<Vec<_>>>()?;
        let outcomes =
            futures::future::join_all(keys.iter().map(|key| claims.try_claim(key, hold))).await;
        let mut failure = None;
        let mut state = self.lock();
        for (index, outcome) in due.iter().zip(outcomes) {
            match outcome {
                Ok(true) => {
                    if let Some(held) = state.slots.get_mut(index) {
                        held.through = epoch + 1;
                        // A slot left alone in the last quarter is usable again.
                        self.freed.notify_one();
                    }
                }
                Ok(false) => {
                    if let Some(held) = state.slots.get_mut(index) {
                        held.lost = true;
                    }
                    tracing::warn!(
                        topic = %self.bucket,
                        slot = index,
                        "another process claimed a global concurrency slot this listener held (clocks apart by more than 3/4 of the slot lease?); it lapses at the end of this epoch"
                    );
                }
                Err(err) => failure = Some(err),
            }
        }
        failure.map_or(Ok(()), Err)
    }
}
