//! The mark that tells every process a topic has priority lanes: the claim
//! `__ezmq|lanes|<topic>`, held [`MAX_CLAIM_HOLD`] (30 days).
//!
//! A producer marks a topic before its first `High` or `Low` push, and
//! marks it again (a release, then a claim) when its own mark is a day
//! old, so the mark outlives every prioritized job pushed with a delay of
//! up to [`MAX_PRIORITY_DELAY`]. Listeners look at it every other second
//! (with the topic-pause watch) and read the lanes only while it is there:
//! a topic never pushed with a priority is fetched exactly as before.
//! Tools ([`Admin`](crate::Admin)) look at it before they count or list
//! the lanes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::spi::{ExclusiveClaim, MAX_CLAIM_HOLD};
use crate::topic::Topic;

/// The one token every holder of the mark uses: whoever marks a topic
/// again may release it.
const TOKEN: &str = "lanes-v1";

/// A producer marks a topic again once its own mark is this old.
const REMARK_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The longest delay of a prioritized push: the mark (30 days, renewed
/// daily) outlives it.
pub(crate) const MAX_PRIORITY_DELAY: Duration = Duration::from_secs(29 * 24 * 3600);

/// The claim that marks `topic`.
fn mark_name(topic: &Topic) -> Result<Topic> {
    Topic::internal("lanes", &[topic.as_str()])
}

/// True while `topic` is marked as having lanes.
pub(crate) async fn is_marked(claims: &dyn ExclusiveClaim, topic: &Topic) -> Result<bool> {
    Ok(claims.holder(&mark_name(topic)?).await?.is_some())
}

/// A client's marks: when it last marked each topic.
#[derive(Debug, Default)]
pub(crate) struct LaneMarks {
    marked: Mutex<HashMap<Topic, Instant>>,
}

impl LaneMarks {
    /// Marks `topic` unless this client did within the last day. A push
    /// waits for it, once a day per topic.
    pub(crate) async fn mark(&self, claims: &dyn ExclusiveClaim, topic: &Topic) -> Result<()> {
        let last = self.marked.lock().ok().and_then(|m| m.get(topic).copied());
        if last.is_some_and(|at| at.elapsed() < REMARK_AFTER) {
            return Ok(());
        }
        let name = mark_name(topic)?;
        if last.is_some() {
            // Renewed, not extended (a claim is never extended): listeners
            // keep their lanes across the moment it is absent.
            claims.release(&name, TOKEN).await?;
        }
        // Won or held by another producer: either way the topic is marked.
        claims.claim(&name, TOKEN, MAX_CLAIM_HOLD).await?;
        if let Ok(mut marked) = self.marked.lock() {
            marked.insert(topic.clone(), Instant::now());
        }
        Ok(())
    }
}
