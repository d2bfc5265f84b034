//! The numbers of one topic, as the overview and the topic page show
//! them: each read where the broker can tell, `None` where it cannot.

use ezmq_core::presence::Participant;
use ezmq_core::spi::Capability;
use ezmq_core::{Admin, Result, Topic};

use crate::history::Rates;
use crate::html;

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

/// The heads of a topic's numbers, rates and line, as the overview and the
/// topic page show them.
pub(crate) const COLUMNS: [&str; 9] = [
    "Waiting",
    "Scheduled",
    "In flight",
    "Dead letters",
    "In",
    "Done",
    "Failed",
    "Last 15 min",
    "Paused",
];

/// The cells under [`COLUMNS`]: `line` is the backlog's sparkline.
pub(crate) fn cells(n: &TopicNumbers, rates: Rates, line: String) -> Vec<String> {
    vec![
        html::count(n.waiting),
        html::count(n.scheduled),
        html::count(n.in_flight),
        html::count(n.dead_letters),
        html::rate(rates.jobs_in),
        html::rate(rates.done),
        html::rate(rates.failed),
        line,
        n.paused
            .map_or("-", |p| if p { "yes" } else { "no" })
            .to_owned(),
    ]
}
