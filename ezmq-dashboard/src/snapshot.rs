//! One read of everything the overview shows: the live participants,
//! every topic and its numbers. The overview renders one; the sampler
//! keeps them ([`crate::history`]).

use std::time::{SystemTime, UNIX_EPOCH};

use ezmq_core::presence::Participant;
use ezmq_core::{Admin, Error, Topic};
use futures::StreamExt;

use crate::pages::numbers::{self, TopicNumbers, DEAD_LETTER_SUFFIX};

/// Topics read at the same time.
const PARALLEL_READS: usize = 16;

/// A topic and its numbers, or why they could not be read.
pub(crate) type TopicRead = (Topic, Result<TopicNumbers, Error>);

/// What the broker held at one moment.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// When the read started, in Unix milliseconds.
    pub(crate) at_ms: i64,
    /// The live participants; `None` when the broker keeps no presence
    /// or they could not be read.
    pub(crate) participants: Option<Vec<Participant>>,
    /// Every topic (dead-letter topics left out) with its numbers, or why
    /// the topics could not be listed.
    pub(crate) topics: Result<Vec<TopicRead>, Error>,
}

/// Reads the broker: presence once, the topic list, then each topic's
/// numbers, 16 topics at a time.
pub(crate) async fn take(admin: Admin<'_>) -> Snapshot {
    let at_ms = now_ms();
    let participants = if admin.has_presence() {
        match admin.participants().await {
            Ok(participants) => Some(participants),
            Err(err) => {
                tracing::debug!(cause = %err, "dashboard could not read presence");
                None
            }
        }
    } else {
        None
    };
    let topics = match admin
        .topics_with(participants.as_deref().unwrap_or_default())
        .await
    {
        Ok(topics) => Ok(futures::stream::iter(
            topics
                .into_iter()
                .filter(|t| !t.as_str().ends_with(DEAD_LETTER_SUFFIX)),
        )
        .map(|topic| async move {
            let read = numbers::read(admin, &topic).await;
            (topic, read)
        })
        .buffered(PARALLEL_READS)
        .collect()
        .await),
        Err(err) => Err(err),
    };
    Snapshot {
        at_ms,
        participants,
        topics,
    }
}

/// Now, in Unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
