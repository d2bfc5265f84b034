//! Cluster-wide topic pauses: [`Admin::pause`](crate::Admin::pause) holds
//! the [exclusive claim](crate::spi::ExclusiveClaim) `__ezmq|pause|<topic>`
//! (for [`MAX_CLAIM_HOLD`], 30 days, or until resumed), and every listener
//! of the topic, in every process, looks at it every [`POLL`]: while it is
//! held the listener's admission step lets nothing through, as for a
//! listener paused by its handle. A listener looks once before its first
//! fetch, so one started while the topic is paused stays idle.
//!
//! Pushes are still accepted; running handlers finish and are settled as
//! usual; jobs a backend holds prefetched go back to the broker.
//!
//! The same polls look, every other second, whether the topic has
//! priority lanes to read ([`lanes`](super::lanes)).
//!
//! When the broker cannot be asked, a listener keeps what it last saw (a
//! listener that could not look before its first fetch starts unpaused)
//! and warns once until it can look again.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::job::JobId;
use crate::spi::{Backend, ClaimOutcome, ExclusiveClaim, MAX_CLAIM_HOLD};
use crate::topic::{Topic, INTERNAL_PREFIX};

use super::flow_record::FlowRecord;
use super::lanes::LOOK_EVERY;
use super::Ctx;

/// How often a listener looks whether its topic is paused.
pub(crate) const POLL: Duration = Duration::from_millis(500);

/// The claim that pauses `topic`.
pub(crate) fn claim_name(topic: &Topic) -> Result<Topic> {
    Topic::internal("pause", &[topic.as_str()])
}

/// Pauses `topic`: true when it was not paused yet.
pub(crate) async fn pause(claims: &dyn ExclusiveClaim, topic: &Topic) -> Result<bool> {
    let token = JobId::generate();
    let outcome = claims
        .claim(&claim_name(topic)?, token.as_str(), MAX_CLAIM_HOLD)
        .await?;
    Ok(outcome == ClaimOutcome::Won)
}

/// Resumes `topic`: true when it was paused.
pub(crate) async fn resume(claims: &dyn ExclusiveClaim, topic: &Topic) -> Result<bool> {
    let name = claim_name(topic)?;
    match claims.holder(&name).await? {
        Some(token) => claims.release(&name, &token).await,
        None => Ok(false),
    }
}

/// True while `topic` is paused.
pub(crate) async fn is_paused(claims: &dyn ExclusiveClaim, topic: &Topic) -> Result<bool> {
    Ok(claims.holder(&claim_name(topic)?).await?.is_some())
}

/// The claim name a listener of `ctx` watches: `None` when the backend has
/// no claims or the topic is one of ezmq's own.
fn watched(ctx: &Ctx) -> Option<Topic> {
    let topic = ctx.source.topic();
    if topic.as_str().starts_with(INTERNAL_PREFIX) {
        return None;
    }
    ctx.backend.exclusive_claim()?;
    claim_name(topic).ok()
}

/// Looks once, before the first fetch. False when nothing is watched.
pub(crate) async fn first_look(ctx: &Ctx) -> bool {
    let Some(name) = watched(ctx) else {
        return false;
    };
    look(ctx, &*ctx.backend, &name, &mut false).await;
    look_for_lanes(ctx).await;
    true
}

/// Looks whether the topic has priority lanes to read.
async fn look_for_lanes(ctx: &Ctx) {
    if let (Some(lanes), Some(claims)) = (&ctx.lanes, ctx.backend.exclusive_claim()) {
        lanes.look(claims, ctx.source.topic()).await;
    }
}

/// Looks every [`POLL`] until `stop`, and publishes the listener's
/// flow-control record ([`FlowRecord`]) on the same polls.
pub(crate) async fn watch(ctx: Arc<Ctx>, stop: CancellationToken) {
    let Some(name) = watched(&ctx) else {
        return;
    };
    let mut failing = false;
    let mut record = FlowRecord::new(&ctx);
    let mut polls: u32 = 0;
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = tokio::time::sleep(POLL) => {}
        }
        look(&ctx, &*ctx.backend, &name, &mut failing).await;
        if let Some(claims) = ctx.backend.exclusive_claim() {
            record.publish(&ctx, claims).await;
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(LOOK_EVERY) {
            look_for_lanes(&ctx).await;
        }
    }
}

async fn look(ctx: &Ctx, backend: &dyn Backend, name: &Topic, failing: &mut bool) {
    let Some(claims) = backend.exclusive_claim() else {
        return;
    };
    match claims.holder(name).await {
        Ok(holder) => {
            *failing = false;
            let paused = holder.is_some();
            if paused != ctx.control.is_topic_paused() {
                tracing::info!(
                    topic = %ctx.source.topic(),
                    paused,
                    "topic {} cluster-wide",
                    if paused { "paused" } else { "resumed" }
                );
            }
            ctx.control.set_topic_paused(paused);
        }
        Err(err) => {
            if !*failing {
                tracing::warn!(
                    topic = %ctx.source.topic(),
                    cause = %err,
                    "could not look whether the topic is paused; keeping the last state"
                );
            }
            *failing = true;
        }
    }
}
