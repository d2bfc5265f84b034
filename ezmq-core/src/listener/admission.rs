//! The admission step: how many jobs the fetch loop may fetch now.
//!
//! Every fetch asks it first. Today it is made of
//!
//! 1. the listener's **pause** ([`ListenerHandle::pause`](crate::ListenerHandle::pause))
//!    and its topic's, cluster-wide ([`Admin::pause`](crate::Admin::pause),
//!    see [`topic_pause`](super::topic_pause)): while paused nothing is
//!    admitted, and the backend is told once so it gives back what it
//!    holds prefetched
//!    ([`Backend::pause_receiving`](crate::spi::Backend::pause_receiving));
//! 2. the **local concurrency limit**: one slot per running job
//!    ([`ConsumeOptions::concurrency`](crate::ConsumeOptions::concurrency));
//! 3. the topic's **global concurrency**, cluster-wide
//!    ([`ConsumeOptions::global_concurrency`](crate::ConsumeOptions::global_concurrency),
//!    see [`slot_gate`](super::slot_gate)): no more jobs than the listener
//!    holds free slots for, one slot per job until its handler returns;
//! 4. the topic's **rate limit**, cluster-wide
//!    ([`ConsumeOptions::rate_limit`](crate::ConsumeOptions::rate_limit),
//!    see [`rate_gate`](super::rate_gate)): no more jobs than the listener
//!    holds tokens for, and a fetch that waits no longer than they last.
//!
//! So a job is only fetched once every limit let it through — never held
//! by a handler waiting for one while its lease runs.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;

use super::rate_gate::RateGate;
use super::slot_gate::{GlobalSlot, SlotPool};
use super::Ctx;

/// What a fetch may take.
pub(super) struct Admitted {
    /// The slots the fetch may fill (at least one).
    pub(super) permits: Vec<OwnedSemaphorePermit>,
    /// A global concurrency slot per permit, with a limit.
    pub(super) global: Vec<GlobalSlot>,
    /// How long the fetch may wait for jobs.
    pub(super) wait: Duration,
}

/// Waits until the listener may fetch, then returns what the fetch may
/// take. `None` once the listener is stopping.
pub(super) async fn admit(
    ctx: &Ctx,
    pool: Option<&Arc<SlotPool>>,
    rate: Option<&mut RateGate>,
) -> Option<Admitted> {
    wait_while_paused(ctx).await?;
    let mut permits = free_slots(ctx).await?;
    let mut global = match pool {
        Some(pool) => pool.admit(ctx, &mut permits).await?,
        None => Vec::new(),
    };
    let wait = match rate {
        Some(gate) => gate.admit(ctx, &mut permits).await?,
        None => ctx.options.fetch_wait,
    };
    global.truncate(permits.len());
    Some(Admitted {
        permits,
        global,
        wait,
    })
}

/// Returns at once when the listener is not paused; else tells the
/// backend, then waits for a resume. `None` on a stop.
async fn wait_while_paused(ctx: &Ctx) -> Option<()> {
    if !ctx.control.is_paused() {
        return Some(());
    }
    tracing::info!("listener paused");
    if let Err(err) = super::lanes::pause_receiving(ctx).await {
        tracing::warn!(
            topic = %ctx.source.topic(),
            cause = %err,
            "could not give back prefetched jobs on pause; the broker redelivers them when their lease ends"
        );
    }
    tokio::select! {
        biased;
        () = ctx.control.stopping() => return None,
        () = ctx.control.resumed() => {}
    }
    tracing::info!("listener resumed");
    Some(())
}

/// How long the fetch loop waits for more slots to free up once one is free
/// but fewer than half are (see [`free_slots`]).
const LINGER: Duration = Duration::from_millis(1);

/// Waits for at least one free slot, then takes every other free one, up to
/// the concurrency. `None` once the listener is stopping.
///
/// On a busy listener slots come back a few at a time (as ACK batches are
/// answered); fetching at once for every one of them means many small
/// `GETJOB`s. So when fewer than half the slots are free, it waits up to
/// [`LINGER`] for that half before fetching. An idle listener has all its
/// slots free and fetches at once: the wait costs latency only when the
/// listener is saturated, where jobs wait in the queue anyway.
async fn free_slots(ctx: &Ctx) -> Option<Vec<OwnedSemaphorePermit>> {
    let first = tokio::select! {
        biased;
        () = ctx.control.stopping() => return None,
        permit = Arc::clone(&ctx.slots).acquire_owned() => permit.ok()?,
    };
    let concurrency = ctx.options.concurrency;
    let mut permits = Vec::with_capacity(concurrency);
    permits.push(first);
    take_free(ctx, &mut permits);
    let half = concurrency.div_ceil(2);
    if permits.len() < half {
        let linger = tokio::time::sleep(LINGER);
        tokio::pin!(linger);
        while permits.len() < half {
            tokio::select! {
                biased;
                () = ctx.control.stopping() => return None,
                permit = Arc::clone(&ctx.slots).acquire_owned() => permits.push(permit.ok()?),
                () = &mut linger => break,
            }
            take_free(ctx, &mut permits);
        }
    }
    Some(permits)
}

/// Takes every slot free right now, up to the concurrency.
fn take_free(ctx: &Ctx, permits: &mut Vec<OwnedSemaphorePermit>) {
    while permits.len() < ctx.options.concurrency {
        match Arc::clone(&ctx.slots).try_acquire_owned() {
            Ok(permit) => permits.push(permit),
            Err(_) => break,
        }
    }
}
