//! One queue of the in-memory broker: ready messages (FIFO), delayed ones
//! (by due time) and the ones leased to consumers.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ezmq_core::spi::{Cancelled, JobState};
use ezmq_core::{Headers, Job, JobId, Topic};
use tokio::sync::Notify;
use tokio::time::Instant;

/// A stored message, as it will be delivered next.
#[derive(Clone, Debug)]
pub(super) struct Message {
    pub(super) id: JobId,
    pub(super) body: Bytes,
    pub(super) headers: Headers,
    /// The attempt number of its next delivery (1 for a new message).
    pub(super) attempt: u32,
    /// When it is dropped, delivered or not (`PushOptions::ttl`).
    pub(super) expires_at: Option<Instant>,
}

impl Message {
    fn is_expired(&self, now: Instant) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// The job a handler sees for this message.
    pub(super) fn job(&self, topic: &Topic) -> Job {
        Job::new(self.id.clone(), topic.clone(), self.body.clone())
            .with_headers(self.headers.clone())
            .with_attempt(self.attempt)
    }
}

/// A message delivered to a consumer and not settled yet.
#[derive(Debug)]
pub(super) struct Lease {
    pub(super) message: Message,
    /// When the broker takes it back and redelivers it.
    pub(super) until: Instant,
}

/// One queue: a topic's, or one consumer group's copy of a fan-out topic.
#[derive(Debug, Default)]
pub(super) struct Queue {
    ready: VecDeque<Message>,
    /// Delayed messages by (due time, sequence number).
    delayed: BTreeMap<(Instant, u64), Message>,
    /// Leased messages by delivery token.
    leased: HashMap<u64, Lease>,
    /// Woken on every change a waiting receiver may care about.
    notify: Arc<Notify>,
}

impl Queue {
    /// The queue's wake-up signal (receivers wait on it).
    pub(super) fn notify(&self) -> Arc<Notify> {
        Arc::clone(&self.notify)
    }

    /// Adds a message: ready now, or due at `due` (`seq` orders messages
    /// due at the same instant). Wakes the waiting receivers.
    pub(super) fn add(&mut self, message: Message, due: Option<(Instant, u64)>) {
        match due {
            Some(key) => {
                self.delayed.insert(key, message);
            }
            None => self.ready.push_back(message),
        }
        self.notify.notify_waiters();
    }

    /// Puts a released message back at the head of the queue.
    fn add_front(&mut self, message: Message) {
        self.ready.push_front(message);
        self.notify.notify_waiters();
    }

    /// Promotes the delayed messages due by `now` and takes back the
    /// leases that ran out (their message is redelivered as the next
    /// attempt: the consumer that had it died or hung).
    pub(super) fn sweep(&mut self, now: Instant) {
        while let Some(entry) = self.delayed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            self.ready.push_back(entry.remove());
        }
        let mut expired: Vec<u64> = self
            .leased
            .iter()
            .filter(|(_, lease)| lease.until <= now)
            .map(|(token, _)| *token)
            .collect();
        // Oldest delivery first.
        expired.sort_unstable();
        for token in expired {
            if let Some(lease) = self.leased.remove(&token) {
                let mut message = lease.message;
                message.attempt = message.attempt.saturating_add(1);
                self.ready.push_back(message);
            }
        }
    }

    /// When the next delayed message comes due or the next lease runs
    /// out, whichever is first.
    pub(super) fn next_wake(&self) -> Option<Instant> {
        let due = self.delayed.keys().next().map(|(at, _)| *at);
        let lease = self.leased.values().map(|lease| lease.until).min();
        due.into_iter().chain(lease).min()
    }

    /// Leases up to `max` ready messages until `until`, with `next_token`
    /// numbering them; expired messages on the way are dropped.
    pub(super) fn lease(
        &mut self,
        max: usize,
        now: Instant,
        until: Instant,
        mut next_token: impl FnMut() -> u64,
    ) -> Vec<(u64, Message)> {
        let mut taken = Vec::new();
        while taken.len() < max {
            let Some(message) = self.ready.pop_front() else {
                break;
            };
            if message.is_expired(now) {
                continue;
            }
            let token = next_token();
            taken.push((token, message.clone()));
            self.leased.insert(token, Lease { message, until });
        }
        taken
    }

    /// Removes the lease `token` (settled), after taking back the leases
    /// that ran out by `now`. `None`: not leased any more.
    pub(super) fn settle(&mut self, token: u64, now: Instant) -> Option<Message> {
        self.sweep(now);
        self.leased.remove(&token).map(|lease| lease.message)
    }

    /// Gives a leased message back: first in line, same attempt.
    pub(super) fn release(&mut self, token: u64, now: Instant) -> bool {
        match self.settle(token, now) {
            Some(message) => {
                self.add_front(message);
                true
            }
            None => false,
        }
    }

    /// Extends the lease `token` to `now + lease`; false when it is not
    /// leased any more (settled, or ran out and taken back).
    pub(super) fn extend(&mut self, token: u64, now: Instant, lease: Duration) -> bool {
        self.sweep(now);
        match self.leased.get_mut(&token) {
            Some(entry) => {
                entry.until = now + lease;
                true
            }
            None => false,
        }
    }

    /// Ready messages (not delayed, not leased, not expired).
    pub(super) fn ready_len(&self, now: Instant) -> u64 {
        let live = self.ready.iter().filter(|m| !m.is_expired(now)).count();
        u64::try_from(live).unwrap_or(u64::MAX)
    }

    /// Messages leased to consumers.
    pub(super) fn leased_len(&self) -> u64 {
        u64::try_from(self.leased.len()).unwrap_or(u64::MAX)
    }

    /// Up to `n` ready messages, oldest first, left in place.
    pub(super) fn peek(&self, n: usize, now: Instant) -> impl Iterator<Item = &Message> {
        self.ready
            .iter()
            .filter(move |m| !m.is_expired(now))
            .take(n)
    }

    /// Every live message in `state`, with when it comes due (delayed
    /// ones). Delayed messages are retrying when their next delivery is a
    /// second attempt or later.
    pub(super) fn in_state(
        &self,
        state: JobState,
        now: Instant,
    ) -> Vec<(&Message, Option<Instant>)> {
        let live = |m: &&Message| !m.is_expired(now);
        match state {
            JobState::Ready => self.ready.iter().filter(live).map(|m| (m, None)).collect(),
            JobState::Running => self
                .leased
                .values()
                .map(|lease| &lease.message)
                .filter(live)
                .map(|m| (m, None))
                .collect(),
            JobState::Scheduled | JobState::Retrying => {
                let retrying = state == JobState::Retrying;
                self.delayed
                    .iter()
                    .filter(|(_, m)| live(m) && (m.attempt > 1) == retrying)
                    .map(|((due, _), m)| (m, Some(*due)))
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    /// Removes message `id` unless it is leased.
    pub(super) fn cancel(&mut self, id: &JobId) -> Cancelled {
        if let Some(at) = self.ready.iter().position(|m| &m.id == id) {
            self.ready.remove(at);
            return Cancelled::Removed;
        }
        let delayed = self
            .delayed
            .iter()
            .find(|(_, m)| &m.id == id)
            .map(|(k, _)| *k);
        if let Some(key) = delayed {
            self.delayed.remove(&key);
            return Cancelled::Removed;
        }
        if self.leased.values().any(|lease| &lease.message.id == id) {
            return Cancelled::Running;
        }
        Cancelled::NotFound
    }

    /// Moves delayed message `id` to `due` (keeping its sequence number);
    /// false when it is not delayed.
    pub(super) fn reschedule(&mut self, id: &JobId, due: Instant) -> bool {
        let delayed = self
            .delayed
            .iter()
            .find(|(_, m)| &m.id == id)
            .map(|(k, _)| *k);
        match delayed.and_then(|key| self.delayed.remove(&key).map(|m| (key.1, m))) {
            Some((seq, message)) => {
                self.delayed.insert((due, seq), message);
                self.notify.notify_waiters();
                true
            }
            None => false,
        }
    }

    /// Makes delayed message `id` ready now; false when it is not delayed.
    pub(super) fn promote(&mut self, id: &JobId) -> bool {
        let delayed = self
            .delayed
            .iter()
            .find(|(_, m)| &m.id == id)
            .map(|(k, _)| *k);
        match delayed.and_then(|key| self.delayed.remove(&key)) {
            Some(message) => {
                self.ready.push_back(message);
                self.notify.notify_waiters();
                true
            }
            None => false,
        }
    }
}
