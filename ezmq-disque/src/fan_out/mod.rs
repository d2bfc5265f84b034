//! STUB written by the lead so the crate compiles; the features engineer
//! replaces this file with the real fan-out implementation.

use ezmq_core::{Result, Topic};

/// Per-backend fan-out state.
#[derive(Debug, Default)]
pub(crate) struct FanOutState {}

/// The queue of consumer group `group` of broadcast topic `topic`.
pub(crate) fn group_queue(topic: &Topic, group: &Topic) -> Result<Topic> {
    Topic::internal("bc", &[topic.as_str(), group.as_str()])
}
