//! Reading a topic's priority lanes ([`Priority`]).
//!
//! A listener of a topic reads its lanes only while the topic is marked as
//! having them ([`lane_mark`]), which the topic-pause
//! watch looks at every [`LOOK_EVERY`] polls (and once before the first
//! fetch); until then it fetches the topic's queue alone, as before. Once
//! marked, the lanes are read until the mark has been gone for
//! [`STICKY`].
//!
//! A fetch of `max` jobs over the lanes:
//!
//! 1. splits `max` by a smooth weighted round-robin over the weights 6 : 3
//!    : 1 (its state kept from fetch to fetch, so the split holds over
//!    small fetches too) and takes each lane's share without waiting, all
//!    lanes at once;
//! 2. gives what is left to the lanes that filled their share, highest
//!    first (a lane with nothing waiting gives its share away);
//! 3. when no lane had anything, waits on the topic's queue for up to the
//!    idle wait, [`IDLE_MIN`] doubling to [`IDLE_MAX`] while the lanes stay
//!    empty: a High or Low job pushed to an idle listener starts within
//!    [`IDLE_MAX`], a Normal one at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::lane_mark;
use crate::priority::{self, Priority};
use crate::spi::{Delivery, ExclusiveClaim, Source};
use crate::topic::{Topic, INTERNAL_PREFIX};

use super::Ctx;

/// The mark is looked at on every this many topic-pause polls.
pub(super) const LOOK_EVERY: u32 = 4;
/// How long a listener keeps reading the lanes after the mark went.
const STICKY: Duration = Duration::from_secs(600);
/// The first idle wait on the topic's queue, after a fetch found jobs.
const IDLE_MIN: Duration = Duration::from_millis(50);
/// The longest idle wait on the topic's queue while the lanes are read.
const IDLE_MAX: Duration = Duration::from_millis(500);

/// What a listener knows of its topic's lanes (shared by the fetch loop
/// and the watch).
pub(super) struct LaneWatch {
    /// High, the topic, Low.
    sources: [Source; 3],
    /// True while the lanes are read.
    active: AtomicBool,
    /// True once they were (their prefetched jobs are given back on a
    /// pause or stop).
    ever: AtomicBool,
    /// Since when the mark has been absent while active.
    unmarked_since: Mutex<Option<Instant>>,
}

impl LaneWatch {
    /// The lanes of a listener on `source`: `None` for a broadcast group,
    /// one of ezmq's own topics, or a backend without priorities.
    pub(super) fn of(source: &Source, claims: Option<&dyn ExclusiveClaim>) -> Option<Self> {
        let Source::Topic(topic) = source else {
            return None;
        };
        claims?;
        if topic.as_str().starts_with(INTERNAL_PREFIX) {
            return None;
        }
        let [high, normal, low] = priority::lanes(topic).ok()?;
        Some(LaneWatch {
            sources: [
                Source::Topic(high),
                Source::Topic(normal),
                Source::Topic(low),
            ],
            active: AtomicBool::new(false),
            ever: AtomicBool::new(false),
            unmarked_since: Mutex::new(None),
        })
    }

    /// True while the fetch loop reads the lanes.
    pub(super) fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// The lanes' queues, highest first.
    pub(super) fn topics(&self) -> impl Iterator<Item = &Topic> {
        self.sources.iter().map(Source::topic)
    }

    /// Looks at the mark of `topic`; errors keep what was last seen.
    pub(super) async fn look(&self, claims: &dyn ExclusiveClaim, topic: &Topic) {
        let marked = match lane_mark::is_marked(claims, topic).await {
            Ok(marked) => marked,
            Err(err) => {
                tracing::debug!(topic = %topic, cause = %err, "could not look whether the topic has priority lanes");
                return;
            }
        };
        let Ok(mut since) = self.unmarked_since.lock() else {
            return;
        };
        if marked {
            *since = None;
            if !self.active.swap(true, Ordering::Relaxed) {
                self.ever.store(true, Ordering::Relaxed);
                tracing::info!(topic = %topic, "topic has priority lanes; reading them");
            }
        } else if self.is_active() {
            let first = *since.get_or_insert_with(Instant::now);
            if first.elapsed() >= STICKY {
                self.active.store(false, Ordering::Relaxed);
                *since = None;
                tracing::info!(topic = %topic, "topic's priority lanes unmarked; reading its queue alone");
            }
        }
    }

    /// Tells the backend the listener stops receiving from every lane it
    /// read (see [`Backend::pause_receiving`](crate::spi::Backend::pause_receiving)).
    pub(super) async fn pause_receiving(&self, ctx: &Ctx) -> Result<()> {
        let [high, _, low] = &self.sources;
        if !self.ever.load(Ordering::Relaxed) {
            return Ok(());
        }
        let (high, low) = tokio::join!(
            ctx.backend.pause_receiving(high),
            ctx.backend.pause_receiving(low)
        );
        high.and(low)
    }
}

/// Tells the backend the listener of `ctx` stops receiving, from its
/// topic and from every lane it read.
pub(super) async fn pause_receiving(ctx: &Ctx) -> Result<()> {
    let own = ctx.backend.pause_receiving(&ctx.source).await;
    match &ctx.lanes {
        Some(lanes) => own.and(lanes.pause_receiving(ctx).await),
        None => own,
    }
}

/// The fetch loop's side: the round-robin state and the idle wait.
pub(super) struct LaneFetch {
    current: [i64; 3],
    idle_wait: Duration,
}

impl LaneFetch {
    pub(super) fn new() -> Self {
        LaneFetch {
            current: [0; 3],
            idle_wait: IDLE_MIN,
        }
    }

    /// How many of `max` jobs each lane is offered first: a smooth
    /// weighted round-robin (each unit goes to the lane furthest ahead of
    /// its share).
    fn split(&mut self, max: usize) -> [usize; 3] {
        let total: i64 = Priority::ALL.iter().map(|p| i64::from(p.weight())).sum();
        let mut quota = [0; 3];
        for _ in 0..max {
            for (current, p) in self.current.iter_mut().zip(Priority::ALL) {
                *current += i64::from(p.weight());
            }
            let mut pick = 0;
            for lane in 1..3 {
                if self.current[lane] > self.current[pick] {
                    pick = lane;
                }
            }
            self.current[pick] -= total;
            quota[pick] += 1;
        }
        quota
    }

    /// Up to `max` jobs from the lanes of `lanes`, waiting up to `wait`
    /// (see the module). Jobs from a lane belong to the topic.
    pub(super) async fn receive(
        &mut self,
        ctx: &Ctx,
        lanes: &LaneWatch,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Delivery>> {
        let quota = self.split(max);
        let offers = lanes
            .sources
            .iter()
            .zip(quota)
            .filter(|(_, share)| *share > 0)
            .map(|(source, share)| async move {
                let got = ctx.backend.receive(source, share, Duration::ZERO).await;
                (source, share, got)
            });
        let mut out = Vec::with_capacity(max);
        let mut failure: Option<Error> = None;
        let mut more = [true; 3];
        for (source, share, got) in futures::future::join_all(offers).await {
            let lane = lane_index(lanes, source);
            match got {
                Ok(jobs) => {
                    more[lane] = jobs.len() >= share;
                    out.extend(jobs);
                }
                Err(err) => {
                    more[lane] = false;
                    failure.get_or_insert(err);
                }
            }
        }
        for (lane, source) in lanes.sources.iter().enumerate() {
            let left = max.saturating_sub(out.len());
            if left == 0 {
                break;
            }
            if !more[lane] {
                continue;
            }
            match ctx.backend.receive(source, left, Duration::ZERO).await {
                Ok(jobs) => out.extend(jobs),
                Err(err) => {
                    failure.get_or_insert(err);
                }
            }
        }
        if out.is_empty() {
            if let Some(err) = failure {
                return Err(err);
            }
            let idle = wait.min(self.idle_wait);
            out = ctx.backend.receive(&ctx.source, max, idle).await?;
            if out.is_empty() {
                self.idle_wait = (self.idle_wait * 2).min(IDLE_MAX);
                return Ok(out);
            }
        } else if let Some(err) = failure {
            // The jobs received run; the lane that failed is asked again
            // on the next fetch.
            tracing::warn!(topic = %ctx.source.topic(), cause = %err, "fetching a priority lane failed");
        }
        self.idle_wait = IDLE_MIN;
        let topic = ctx.source.topic();
        for delivery in &mut out {
            if delivery.job.topic() != topic {
                delivery.job.set_topic(topic.clone());
            }
        }
        Ok(out)
    }
}

/// Which of `lanes` `source` is.
fn lane_index(lanes: &LaneWatch, source: &Source) -> usize {
    lanes
        .sources
        .iter()
        .position(|s| s == source)
        .unwrap_or(Priority::Normal.index())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_follows_the_weights_and_never_skips_high_for_two() {
        let mut fetch = LaneFetch::new();
        assert_eq!(fetch.split(10), [6, 3, 1]);
        let mut totals = [0; 3];
        for _ in 0..100 {
            let quota = fetch.split(1);
            for lane in 0..3 {
                totals[lane] += quota[lane];
            }
        }
        assert_eq!(totals, [60, 30, 10]);
        for _ in 0..50 {
            assert!(
                fetch.split(2)[0] >= 1,
                "High gets a share of every fetch of two"
            );
        }
    }
}
