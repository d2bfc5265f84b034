//! The state the connections of one in-memory broker share.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use ezmq_core::spi::Source;
use ezmq_core::{JobId, Topic};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::queue::Queue;

/// Everything one broker holds, behind one lock (never held across an
/// `.await`).
#[derive(Debug, Default)]
pub(super) struct State {
    next_seq: u64,
    queues: HashMap<Source, Queue>,
    /// Consumer groups by fan-out topic, then by group name.
    pub(super) groups: HashMap<Topic, BTreeMap<Topic, Group>>,
    /// Exclusive claims: key to the end of its hold and its holder's token.
    pub(super) claims: HashMap<Topic, (Instant, String)>,
    /// Message ids pushed recently: (topic, id) to the end of its window.
    seen: HashMap<(Topic, String), (Instant, JobId)>,
    /// The same entries by (window end, sequence number), to forget them.
    seen_by_expiry: BTreeMap<(Instant, u64), (Topic, String)>,
    /// Reply inboxes by address.
    pub(super) inboxes: HashMap<String, InboxState>,
}

/// One consumer group of a fan-out topic.
#[derive(Debug)]
pub(super) struct Group {
    /// Members by id, with the end of their current retention.
    pub(super) members: HashMap<u64, Instant>,
    /// The group is dropped at this instant unless a member refreshes
    /// (the latest member retention, or a leave plus the retention).
    pub(super) keep_until: Instant,
}

impl Group {
    /// Members whose retention has not run out.
    pub(super) fn live_members(&self, now: Instant) -> u64 {
        let live = self.members.values().filter(|until| **until > now).count();
        u64::try_from(live).unwrap_or(u64::MAX)
    }
}

/// One private reply inbox.
#[derive(Debug)]
pub(super) struct InboxState {
    /// The connection that opened it (closing that connection removes it).
    pub(super) owner: u64,
    /// Replies with the instant they are dropped unread.
    pub(super) replies: VecDeque<(Bytes, Instant)>,
    pub(super) notify: Arc<Notify>,
}

impl State {
    /// A number never returned before by this broker.
    pub(super) fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// The queue of `source`, created empty when new.
    pub(super) fn queue(&mut self, source: &Source) -> &mut Queue {
        self.queues.entry(source.clone()).or_default()
    }

    /// Wakes every waiting receiver (of queues and inboxes).
    pub(super) fn wake_all(&self) {
        for queue in self.queues.values() {
            queue.notify().notify_waiters();
        }
        for inbox in self.inboxes.values() {
            inbox.notify.notify_waiters();
        }
    }

    /// The queue of `source` when it exists.
    pub(super) fn existing_queue(&mut self, source: &Source) -> Option<&mut Queue> {
        self.queues.get_mut(source)
    }

    /// Splits the borrow: the queue of `source` and a sequence counter.
    pub(super) fn queue_and_seq(&mut self, source: &Source) -> (&mut Queue, &mut u64) {
        let queue = self.queues.entry(source.clone()).or_default();
        (queue, &mut self.next_seq)
    }

    /// Drops the queue of `source` (a consumer group that was dropped).
    pub(super) fn remove_queue(&mut self, source: &Source) {
        self.queues.remove(source);
    }

    /// The id of a push of `id` to `topic` within its window, if any
    /// (forgetting the ids whose window ended by `now`).
    pub(super) fn seen(&mut self, topic: &Topic, id: &str, now: Instant) -> Option<JobId> {
        while let Some(entry) = self.seen_by_expiry.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            if self.seen.get(&key).is_some_and(|(until, _)| *until <= now) {
                self.seen.remove(&key);
            }
        }
        self.seen
            .get(&(topic.clone(), id.to_owned()))
            .map(|(_, first)| first.clone())
    }

    /// Remembers a push of `id` to `topic` until `until`.
    pub(super) fn remember(&mut self, topic: &Topic, id: &str, job: JobId, until: Instant) {
        let key = (topic.clone(), id.to_owned());
        let seq = self.next_seq();
        self.seen_by_expiry.insert((until, seq), key.clone());
        self.seen.insert(key, (until, job));
    }

    /// Drops the groups of `topic` whose retention ran out, with their
    /// queues.
    pub(super) fn prune_groups(&mut self, topic: &Topic, now: Instant) {
        let Some(groups) = self.groups.get_mut(topic) else {
            return;
        };
        let mut dropped = Vec::new();
        groups.retain(|name, group| {
            group.members.retain(|_, until| *until > now);
            let keep = group.keep_until > now;
            if !keep {
                dropped.push(name.clone());
            }
            keep
        });
        if groups.is_empty() {
            self.groups.remove(topic);
        }
        for group in dropped {
            tracing::debug!(%topic, %group, "consumer group without live members dropped");
            self.remove_queue(&Source::Group {
                topic: topic.clone(),
                group,
            });
        }
    }
}

/// The lock on a broker's state; a panic while it was held (a bug in a
/// test) does not poison the others' view.
pub(super) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}
