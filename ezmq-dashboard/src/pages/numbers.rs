//! The numbers of one topic, as the overview and the topic page show
//! them: each read where the broker can tell, `None` where it cannot.

use ezmq_core::presence::Participant;
use ezmq_core::spi::Capability;
use ezmq_core::{Admin, Result, Topic};

/// What a dead-letter topic's name ends with.
pub(crate) const DEAD_LETTER_SUFFIX: &str = ".dead-letter";

/// One topic's numbers.
#[derive(Debug)]
pub(crate) struct TopicNumbers {
    pub(crate) waiting: Option<u64>,
    pub(crate) scheduled: Option<u64>,
    pub(crate) in_flight: Option<u64>,
    pub(crate) dead_letters: Option<u64>,
    pub(crate) paused: Option<bool>,
}

/// The dead-letter topic of `topic`.
pub(crate) fn dead_letter_topic(topic: &Topic) -> Result<Topic> {
    Topic::new(format!("{topic}{DEAD_LETTER_SUFFIX}"))
}

/// Reads `topic`'s numbers.
pub(crate) async fn read(admin: Admin<'_>, topic: &Topic) -> Result<TopicNumbers> {
    let caps = admin.capabilities();
    let dead = dead_letter_topic(topic)?;
    let stats = caps.has(Capability::QueueStats);
    let (waiting, scheduled, in_flight, dead_letters, paused) = tokio::try_join!(
        async {
            if stats {
                admin.queue_len(topic).await.map(Some)
            } else {
                Ok(None)
            }
        },
        async {
            if caps.has(Capability::JobStore) {
                admin.scheduled_len(topic).await.map(Some)
            } else {
                Ok(None)
            }
        },
        async {
            if stats {
                admin.in_flight(topic).await
            } else {
                Ok(None)
            }
        },
        async {
            if stats {
                admin.queue_len(&dead).await.map(Some)
            } else {
                Ok(None)
            }
        },
        async {
            if caps.has(Capability::ExclusiveClaim) {
                admin.is_paused(topic).await.map(Some)
            } else {
                Ok(None)
            }
        },
    )?;
    Ok(TopicNumbers {
        waiting,
        scheduled,
        in_flight,
        dead_letters,
        paused,
    })
}

/// How many live listeners of `participants` consume `topic`.
pub(crate) fn listeners_of(participants: &[Participant], topic: &str) -> usize {
    participants
        .iter()
        .flat_map(|p| &p.listeners)
        .filter(|l| l.topic == topic)
        .count()
}
