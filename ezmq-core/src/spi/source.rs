//! Where a listener receives from.

use std::fmt;

use crate::topic::Topic;

/// What a [`Backend::receive`](super::Backend::receive) call reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// A topic's queue: each message goes to one consumer.
    Topic(Topic),
    /// Consumer group `group` of fan-out topic `topic` (see
    /// [`FanOut`](super::FanOut)): every group gets every message, one
    /// member of the group processes it.
    Group {
        /// The broadcast topic.
        topic: Topic,
        /// The group (a valid topic name).
        group: Topic,
    },
}

impl Source {
    /// The topic read (the broadcast topic for a group).
    pub fn topic(&self) -> &Topic {
        match self {
            Source::Topic(topic) | Source::Group { topic, .. } => topic,
        }
    }

    /// The group, for a group source.
    pub fn group(&self) -> Option<&Topic> {
        match self {
            Source::Topic(_) => None,
            Source::Group { group, .. } => Some(group),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Topic(topic) => write!(f, "{topic}"),
            Source::Group { topic, group } => write!(f, "{topic} (group {group})"),
        }
    }
}
