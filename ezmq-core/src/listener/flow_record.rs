//! What a listener with cluster-wide limits tells other processes
//! ([`Admin::flow`](crate::Admin::flow), `ezmq stats`): its limits, as the
//! token of the claim `__ezmq|flow|<topic>` (held 30 s, claimed again by a
//! running listener within a second of lapsing), and, while it waits for a
//! token or a slot, the claim `__ezmq|flow-held|<topic>` (held 5 s).
//!
//! The topic-pause watch ([`topic_pause::watch`](super::topic_pause))
//! publishes both on its polls: no task of its own, one more claim read
//! every other poll (and a claim when the record lapsed).

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::error::Result;
use crate::flow_status::{FlowLimits, FlowStatus};
use crate::spi::{ClaimOutcome, ExclusiveClaim};
use crate::topic::Topic;

use super::Ctx;

/// How long the limits record is held.
const RECORD_HOLD: Duration = Duration::from_secs(30);
/// How long "held back" lasts after the last wait.
const HELD_BACK_HOLD: Duration = Duration::from_secs(5);
/// The record is looked at on every this many pause polls.
const RECORD_EVERY: u32 = 2;

/// The claim holding `topic`'s limits.
fn record_name(topic: &Topic) -> Result<Topic> {
    Topic::internal("flow", &[topic.as_str()])
}

/// The claim held while `topic`'s listeners wait for their limits.
fn held_back_name(topic: &Topic) -> Result<Topic> {
    Topic::internal("flow-held", &[topic.as_str()])
}

/// One listener's side of the record.
pub(super) struct FlowRecord {
    token: Option<String>,
    polls: u32,
    warned: bool,
}

impl FlowRecord {
    /// The record of a listener of `ctx` (nothing to publish without limits).
    pub(super) fn new(ctx: &Ctx) -> Self {
        FlowRecord {
            token: FlowLimits::of(&ctx.options).map(|limits| limits.to_token()),
            polls: 0,
            warned: false,
        }
    }

    /// Publishes the limits (when the record lapsed) and the "held back"
    /// mark (when the listener waited since the last poll). Errors are
    /// left to the next poll.
    pub(super) async fn publish(&mut self, ctx: &Ctx, claims: &dyn ExclusiveClaim) {
        let Some(token) = &self.token else {
            return;
        };
        let topic = ctx.source.topic();
        if self.polls.is_multiple_of(RECORD_EVERY) {
            if let Ok(name) = record_name(topic) {
                let published = match claims.holder(&name).await {
                    Ok(None) => claims.claim(&name, token, RECORD_HOLD).await,
                    Ok(Some(other)) => Ok(ClaimOutcome::Held(Some(other))),
                    Err(err) => Err(err),
                };
                match published {
                    Ok(ClaimOutcome::Held(Some(other))) if other != *token && !self.warned => {
                        self.warned = true;
                        tracing::warn!(
                            topic = %topic,
                            published = %other,
                            own = %token,
                            "another listener of this topic runs with other limits; each set of limits is a bucket of its own"
                        );
                    }
                    Ok(_) | Err(_) => {}
                }
            }
        }
        self.polls = self.polls.wrapping_add(1);
        if ctx.held_back.swap(false, Ordering::Relaxed) {
            if let Ok(name) = held_back_name(topic) {
                let _ = claims.claim(&name, "held back", HELD_BACK_HOLD).await;
            }
        }
    }
}

/// `topic`'s flow control as its listeners published it.
pub(crate) async fn status(claims: &dyn ExclusiveClaim, topic: &Topic) -> Result<FlowStatus> {
    let record = claims.holder(&record_name(topic)?).await?;
    let held = claims.holder(&held_back_name(topic)?).await?;
    Ok(FlowStatus {
        limits: record.as_deref().and_then(FlowLimits::from_token),
        held_back: held.is_some(),
    })
}
