//! The last 15 minutes of every topic's numbers, sampled, and the rates
//! they give: jobs in, jobs done and handler failures per second.
//!
//! A sample holds each topic's backlog (waiting + scheduled + in flight)
//! and dead letters, and each live listener's counts of handler runs
//! ([`ListenerPresence::succeeded`](ezmq_core::presence::ListenerPresence::succeeded) and
//! [`failed`](ezmq_core::presence::ListenerPresence::failed),
//! cumulative since the listener started). Between two samples:
//! - **done** and **failed** are the listeners' counts' growth (a listener
//!   that started in between counts whole; one that stopped in between
//!   loses what it did since the older sample);
//! - **in** is what the topic's backlog and dead letters grew by, plus what
//!   was done: jobs purged or cancelled meanwhile make it read low (never
//!   below zero).
//!
//! Rates are taken over the last minute (over what there is once 10
//! seconds are sampled); before that they are unknown.

use std::collections::{HashMap, VecDeque};

use ezmq_core::presence::Participant;

use crate::pages::numbers::TopicNumbers;

/// How far back samples are kept.
pub(crate) const KEPT_MS: i64 = 15 * 60 * 1000;
/// Samples closer than this to the newest replace it.
const MIN_APART_MS: i64 = 5_000;
/// The window rates are taken over.
const RATE_WINDOW_MS: i64 = 60_000;
/// The shortest window a rate is given for.
const MIN_RATE_WINDOW_MS: i64 = 10_000;

/// One listener across samples: a restarted listener is another one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ListenerKey {
    participant: String,
    topic: String,
    group: Option<String>,
    started_at_ms: i64,
}

/// A listener's counts in one sample.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    succeeded: u64,
    failed: u64,
}

/// A topic's numbers in one sample.
#[derive(Clone, Copy, Debug)]
struct TopicSample {
    /// Waiting + scheduled + in flight (what the broker tells of them).
    backlog: u64,
    dead: u64,
}

/// Every topic's numbers at one moment.
#[derive(Debug)]
pub(crate) struct Sample {
    at_ms: i64,
    topics: HashMap<String, TopicSample>,
    /// `None` without presence: done and failed are unknown.
    listeners: Option<HashMap<ListenerKey, Counts>>,
}

impl Sample {
    /// A sample taken at `at_ms`: `participants` is `None` when the broker
    /// keeps no presence.
    pub(crate) fn new(
        at_ms: i64,
        topics: &[(String, &TopicNumbers)],
        participants: Option<&[Participant]>,
    ) -> Self {
        let topics = topics
            .iter()
            .map(|(name, n)| {
                let backlog =
                    n.waiting.unwrap_or(0) + n.scheduled.unwrap_or(0) + n.in_flight.unwrap_or(0);
                let dead = n.dead_letters.unwrap_or(0);
                (name.clone(), TopicSample { backlog, dead })
            })
            .collect();
        let listeners = participants.map(|participants| {
            participants
                .iter()
                .flat_map(|p| p.listeners.iter().map(move |l| (p, l)))
                .map(|(p, l)| {
                    let key = ListenerKey {
                        participant: p.id.clone(),
                        topic: l.topic.clone(),
                        group: l.group.clone(),
                        started_at_ms: l.started_at_ms,
                    };
                    let counts = Counts {
                        succeeded: l.succeeded,
                        failed: l.failed,
                    };
                    (key, counts)
                })
                .collect()
        });
        Sample {
            at_ms,
            topics,
            listeners,
        }
    }
}

/// A topic's rates, per second; `None` where unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Rates {
    pub(crate) jobs_in: Option<f64>,
    pub(crate) done: Option<f64>,
    pub(crate) failed: Option<f64>,
}

/// The samples of the last 15 minutes, oldest first.
#[derive(Debug, Default)]
pub(crate) struct History {
    samples: VecDeque<Sample>,
}

impl History {
    /// Adds `sample` (replacing the newest when it is under 5 s older) and
    /// drops those older than 15 minutes.
    pub(crate) fn record(&mut self, sample: Sample) {
        if self
            .samples
            .back()
            .is_some_and(|newest| sample.at_ms - newest.at_ms < MIN_APART_MS)
            && self.samples.len() > 1
        {
            self.samples.pop_back();
        }
        let horizon = sample.at_ms - KEPT_MS;
        self.samples.push_back(sample);
        while self.samples.front().is_some_and(|s| s.at_ms < horizon) {
            self.samples.pop_front();
        }
    }

    /// `topic`'s rates over the last minute.
    pub(crate) fn rates(&self, topic: &str) -> Rates {
        let Some(newest) = self.samples.back() else {
            return Rates::default();
        };
        let target = newest.at_ms - RATE_WINDOW_MS;
        let base = self
            .samples
            .iter()
            .rev()
            .find(|s| s.at_ms <= target)
            .or_else(|| self.samples.front())
            .filter(|base| newest.at_ms - base.at_ms >= MIN_RATE_WINDOW_MS);
        let Some(base) = base else {
            return Rates::default();
        };
        between(base, newest, topic)
    }

    /// `topic`'s backlog at each sample: (Unix ms, jobs).
    pub(crate) fn backlog(&self, topic: &str) -> Vec<(i64, u64)> {
        self.samples
            .iter()
            .filter_map(|s| s.topics.get(topic).map(|t| (s.at_ms, t.backlog)))
            .collect()
    }
}

/// The rates of `topic` from `old` to `new`.
#[allow(clippy::cast_precision_loss)] // counts far below 2^52
fn between(old: &Sample, new: &Sample, topic: &str) -> Rates {
    let seconds = (new.at_ms - old.at_ms) as f64 / 1000.0;
    let counts = match (&old.listeners, &new.listeners) {
        (Some(before), Some(after)) => Some(grown(before, after, topic, old.at_ms)),
        _ => None,
    };
    let jobs_in = match (old.topics.get(topic), new.topics.get(topic), counts) {
        (Some(before), Some(after), Some(done)) => {
            let held_before = i128::from(before.backlog) + i128::from(before.dead);
            let held_after = i128::from(after.backlog) + i128::from(after.dead);
            let arrived = (held_after - held_before + i128::from(done.succeeded)).max(0);
            Some(arrived as f64 / seconds)
        }
        _ => None,
    };
    Rates {
        jobs_in,
        done: counts.map(|c| c.succeeded as f64 / seconds),
        failed: counts.map(|c| c.failed as f64 / seconds),
    }
}

/// What `topic`'s listeners did between two samples, the older at
/// `old_at_ms`.
fn grown(
    before: &HashMap<ListenerKey, Counts>,
    after: &HashMap<ListenerKey, Counts>,
    topic: &str,
    old_at_ms: i64,
) -> Counts {
    let mut total = Counts::default();
    for (key, now) in after.iter().filter(|(key, _)| key.topic == topic) {
        let then = match before.get(key) {
            Some(then) => *then,
            // Started since: all it did is new.
            None if key.started_at_ms >= old_at_ms => Counts::default(),
            // Running then but not seen (its record had lapsed): unknown.
            None => continue,
        };
        total.succeeded += now.succeeded.saturating_sub(then.succeeded);
        total.failed += now.failed.saturating_sub(then.failed);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(waiting: u64, dead: u64) -> TopicNumbers {
        TopicNumbers {
            waiting: Some(waiting),
            scheduled: Some(0),
            in_flight: None,
            dead_letters: Some(dead),
            paused: None,
        }
    }

    fn sample(at_ms: i64, waiting: u64, dead: u64, listeners: &[(&str, i64, u64, u64)]) -> Sample {
        let n = numbers(waiting, dead);
        let mut s = Sample::new(at_ms, &[("t".to_owned(), &n)], Some(&[]));
        let map = listeners
            .iter()
            .map(|(id, started, succeeded, failed)| {
                (
                    ListenerKey {
                        participant: (*id).to_owned(),
                        topic: "t".to_owned(),
                        group: None,
                        started_at_ms: *started,
                    },
                    Counts {
                        succeeded: *succeeded,
                        failed: *failed,
                    },
                )
            })
            .collect();
        s.listeners = Some(map);
        s
    }

    #[test]
    fn rates_need_ten_seconds_of_samples() {
        let mut h = History::default();
        h.record(sample(0, 10, 0, &[("a", -5, 0, 0)]));
        h.record(sample(6_000, 10, 0, &[("a", -5, 60, 0)]));
        assert_eq!(h.rates("t"), Rates::default());
        h.record(sample(12_000, 10, 0, &[("a", -5, 120, 6)]));
        let r = h.rates("t");
        assert_eq!(r.done, Some(10.0));
        assert_eq!(r.failed, Some(0.5));
        // The backlog held steady while 120 were done: 120 came in.
        assert_eq!(r.jobs_in, Some(10.0));
    }

    #[test]
    fn a_restarted_listener_counts_from_its_start_and_a_lapsed_one_not_at_all() {
        let mut h = History::default();
        h.record(sample(0, 0, 0, &[("a", -5, 500, 0)]));
        // `a` restarted at 1 s (its counts start again); `b` was running
        // before the first sample but its record had lapsed.
        h.record(sample(
            20_000,
            0,
            0,
            &[("a", 1_000, 40, 0), ("b", -100, 999, 0)],
        ));
        assert_eq!(h.rates("t").done, Some(2.0));
    }

    #[test]
    fn jobs_in_counts_growth_and_dead_letters_never_below_zero() {
        let mut h = History::default();
        h.record(sample(0, 100, 0, &[("a", -5, 0, 0)]));
        // 10 s later: 50 more waiting, 5 dead-lettered, 20 done.
        h.record(sample(10_000, 150, 5, &[("a", -5, 20, 5)]));
        assert_eq!(h.rates("t").jobs_in, Some(7.5));
        // A purge of 150: nothing came in, not minus 15 a second.
        h.record(sample(20_000, 0, 5, &[("a", -5, 20, 5)]));
        assert_eq!(h.rates("t").jobs_in, Some(0.0));
    }

    #[test]
    fn without_presence_only_the_backlog_is_known() {
        let n = numbers(3, 0);
        let mut h = History::default();
        h.record(Sample::new(0, &[("t".to_owned(), &n)], None));
        h.record(Sample::new(30_000, &[("t".to_owned(), &n)], None));
        assert_eq!(h.rates("t"), Rates::default());
        assert_eq!(h.backlog("t"), vec![(0, 3), (30_000, 3)]);
    }

    #[test]
    fn samples_close_together_replace_the_newest_and_old_ones_go() {
        let mut h = History::default();
        h.record(sample(0, 1, 0, &[]));
        h.record(sample(10_000, 2, 0, &[]));
        h.record(sample(12_000, 3, 0, &[]));
        assert_eq!(h.backlog("t"), vec![(0, 1), (12_000, 3)]);
        h.record(sample(KEPT_MS + 11_000, 4, 0, &[]));
        assert_eq!(h.backlog("t"), vec![(12_000, 3), (KEPT_MS + 11_000, 4)]);
    }
}
