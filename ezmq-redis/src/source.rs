//! Per-source state of one backend instance: keys, consumer group, and
//! when to next look for due delayed messages and expired leases.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ezmq_core::spi::Source;
use ezmq_core::Topic;
use tokio::time::Instant;

use crate::keys::{TopicKeys, QUEUE_GROUP};

/// A queue topic or a broadcast group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A topic's queue: settled entries are deleted.
    Queue,
    /// A broadcast group: entries are shared with the other groups, never
    /// deleted on ack (the stream is trimmed instead).
    Broadcast {
        /// The broadcast topic.
        topic: Topic,
        /// The group.
        group: Topic,
    },
}

/// The state of one [`Source`] in one backend instance.
#[derive(Debug)]
pub(crate) struct SourceState {
    pub(crate) kind: Kind,
    pub(crate) topic: Topic,
    pub(crate) keys: TopicKeys,
    /// The consumer group name.
    pub(crate) group: String,
    /// True once the consumer group is known to exist.
    pub(crate) ready: AtomicBool,
    timers: Mutex<Timers>,
}

#[derive(Debug)]
struct Timers {
    next_promote: Instant,
    next_reclaim: Instant,
}

impl SourceState {
    pub(crate) fn new(prefix: &str, source: &Source) -> Self {
        let now = Instant::now();
        let (kind, keys, group) = match source.group() {
            None => (
                Kind::Queue,
                TopicKeys::queue(prefix, source.topic()),
                QUEUE_GROUP.to_owned(),
            ),
            Some(group) => (
                Kind::Broadcast {
                    topic: source.topic().clone(),
                    group: group.clone(),
                },
                TopicKeys::broadcast(prefix, source.topic()),
                group.as_str().to_owned(),
            ),
        };
        SourceState {
            kind,
            topic: source.topic().clone(),
            keys,
            group,
            ready: AtomicBool::new(false),
            timers: Mutex::new(Timers {
                next_promote: now,
                next_reclaim: now,
            }),
        }
    }

    fn timers(&self) -> std::sync::MutexGuard<'_, Timers> {
        self.timers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub(crate) fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// True when the delayed set should be looked at now.
    pub(crate) fn promote_due(&self, now: Instant) -> bool {
        self.timers().next_promote <= now
    }

    /// Plans the next look at the delayed set `after` from now.
    pub(crate) fn promote_after(&self, now: Instant, after: Duration) {
        self.timers().next_promote = now + after;
    }

    /// How long until the next look at the delayed set.
    pub(crate) fn until_promote(&self, now: Instant) -> Duration {
        self.timers().next_promote.saturating_duration_since(now)
    }

    /// A delayed message of this source comes due in `delay`: look then.
    pub(crate) fn note_due_in(&self, delay: Duration) {
        let at = Instant::now() + delay;
        let mut timers = self.timers();
        if at < timers.next_promote {
            timers.next_promote = at;
        }
    }

    /// True when expired leases should be reclaimed now.
    pub(crate) fn reclaim_due(&self, now: Instant) -> bool {
        self.timers().next_reclaim <= now
    }

    /// Plans the next reclaim `after` from now (never later than already
    /// planned when `earlier_only`).
    pub(crate) fn reclaim_after(&self, after: Duration, earlier_only: bool) {
        let at = Instant::now() + after;
        let mut timers = self.timers();
        if !earlier_only || at < timers.next_reclaim {
            timers.next_reclaim = at;
        }
    }

    /// True for a queue topic (entries deleted on ack).
    pub(crate) fn is_queue(&self) -> bool {
        self.kind == Kind::Queue
    }
}
