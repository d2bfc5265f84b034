//! How large a consumer's prefetch is, and when it is re-sized.
//!
//! RabbitMQ counts a per-consumer prefetch (`basic.qos`, `global =
//! false`) against the messages delivered to that consumer and not yet
//! settled: the jobs running *and* those waiting in the consumer's buffer.
//! So the right prefetch is the listener's admission, "jobs it runs +
//! slots it has free", which a fetch shows as
//! `target = outstanding + max` (the deliveries handed out and not yet
//! settled on the channel, plus the fetch's `max`). The acker frees a slot
//! before its ack has gone out, so `outstanding` is never below the jobs
//! running and `target` never under-counts the admission (an ack still in
//! flight can only make it larger for a moment).
//!
//! RabbitMQ 3.10 applies a per-consumer `basic.qos` only to consumers
//! started after it on the channel; an existing consumer keeps its limit.
//! Re-sizing therefore means `basic.cancel`, `basic.qos`, `basic.consume`
//! again on the same channel (the running jobs' acks are unaffected). The
//! rule ([`Sizing::resize`]), cheap and free of churn:
//!
//! - **grow** at once when one fetch asks for more than the whole prefetch
//!   (`max > prefetch`: certain evidence, the listener can take more than
//!   the consumer may ever hold; e.g. a consumer opened while the jobs of
//!   a lost connection were still running), to `target`;
//! - **grow** also when every fetch for at least [`SHRINK_AFTER`], and at
//!   least [`SHRINK_FETCHES`] fetches in a row, had `target > prefetch`
//!   (an admission that came back a slot at a time, as a global
//!   concurrency limit's slots do), to the smallest `target` among them
//!   (an ack in flight inflates one fetch's `target`, not every one's);
//! - **shrink** when every fetch for at least [`SHRINK_AFTER`], and at
//!   least [`SHRINK_FETCHES`] fetches in a row, had `target < prefetch`
//!   (the admission really shrank), to the largest `target` among them;
//! - never when [`RabbitConfig::prefetch`](crate::RabbitConfig::prefetch)
//!   fixes it.
//!
//! The deliveries buffered by the cancelled consumer are handed out first
//! by the fetch that re-sized, up to its `max`; the rest are nacked back
//! to the queue.

use std::time::{Duration, Instant};

/// How long every fetch must show a smaller admission before the
/// prefetch shrinks.
pub(crate) const SHRINK_AFTER: Duration = Duration::from_secs(1);

/// How many fetches in a row must show it.
pub(crate) const SHRINK_FETCHES: u32 = 3;

/// The prefetch that covers `outstanding` handed-out deliveries and a
/// fetch of `max` more (at least 1: 0 would mean "unlimited" to AMQP).
pub(crate) fn target(outstanding: usize, max: usize) -> u16 {
    u16::try_from(outstanding.saturating_add(max))
        .unwrap_or(u16::MAX)
        .max(1)
}

/// A consumer's record of the fetches that asked for less than its
/// prefetch.
#[derive(Debug, Default)]
pub(crate) struct Sizing {
    /// Since when every fetch had `target < prefetch`.
    below_since: Option<Instant>,
    /// How many fetches in a row did.
    below_fetches: u32,
    /// The largest `target` among them.
    below_peak: u16,
    /// Since when every fetch had `target > prefetch`.
    above_since: Option<Instant>,
    /// How many fetches in a row did.
    above_fetches: u32,
    /// The smallest `target` among them.
    above_low: u16,
}

impl Sizing {
    /// The prefetch the consumer should be re-created with after a fetch
    /// of `max` when its prefetch is `prefetch` and `target` is
    /// [`target`]`(outstanding, max)`; `None`: keep it.
    pub(crate) fn resize(
        &mut self,
        prefetch: u16,
        max: usize,
        target: u16,
        now: Instant,
    ) -> Option<u16> {
        if max > usize::from(prefetch) {
            *self = Sizing::default();
            return Some(target.max(prefetch.saturating_add(1)));
        }
        if target > prefetch {
            self.below_since = None;
            self.below_fetches = 0;
            self.below_peak = 0;
            let since = *self.above_since.get_or_insert(now);
            self.above_fetches = self.above_fetches.saturating_add(1);
            self.above_low = if self.above_fetches == 1 {
                target
            } else {
                self.above_low.min(target)
            };
            if self.above_fetches >= SHRINK_FETCHES && now.duration_since(since) >= SHRINK_AFTER {
                let to = self.above_low;
                *self = Sizing::default();
                return Some(to);
            }
            return None;
        }
        self.above_since = None;
        self.above_fetches = 0;
        if target == prefetch {
            *self = Sizing::default();
            return None;
        }
        let since = *self.below_since.get_or_insert(now);
        self.below_fetches = self.below_fetches.saturating_add(1);
        self.below_peak = self.below_peak.max(target);
        if self.below_fetches >= SHRINK_FETCHES && now.duration_since(since) >= SHRINK_AFTER {
            let to = self.below_peak;
            *self = Sizing::default();
            return Some(to);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_count_running_and_free() {
        assert_eq!(target(0, 4), 4);
        assert_eq!(target(3, 1), 4);
        assert_eq!(target(0, 0), 1);
        assert_eq!(target(70_000, 1), u16::MAX);
    }

    #[test]
    fn a_busy_listener_keeps_its_prefetch() {
        let mut sizing = Sizing::default();
        let start = Instant::now();
        // Concurrency 4: three running and one free, two and two, ...
        for n in 0..100u32 {
            let now = start + Duration::from_millis(u64::from(n) * 50);
            let max = (n % 4 + 1) as usize;
            assert_eq!(sizing.resize(4, max, target(4 - max, max), now), None);
        }
    }

    #[test]
    fn grows_at_once_when_a_fetch_wants_more_than_the_prefetch() {
        let mut sizing = Sizing::default();
        assert_eq!(sizing.resize(2, 4, target(0, 4), Instant::now()), Some(4));
        assert_eq!(sizing.resize(2, 3, target(0, 3), Instant::now()), Some(3));
    }

    #[test]
    fn grows_after_a_while_when_the_admission_came_back_a_slot_at_a_time() {
        let mut sizing = Sizing::default();
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        // Prefetch 2, the listener now runs 4 (fetches of 1 or 2).
        assert_eq!(sizing.resize(2, 1, target(3, 1), at(0)), None);
        assert_eq!(sizing.resize(2, 2, target(2, 2), at(400)), None);
        assert_eq!(sizing.resize(2, 1, target(5, 1), at(800)), None);
        assert_eq!(sizing.resize(2, 1, target(3, 1), at(1_000)), Some(4));
        // A fetch at the prefetch in between starts the count over.
        assert_eq!(sizing.resize(4, 1, target(4, 1), at(1_100)), None);
        assert_eq!(sizing.resize(4, 1, target(3, 1), at(1_200)), None);
        assert_eq!(sizing.resize(4, 1, target(4, 1), at(2_500)), None);
    }

    #[test]
    fn shrinks_only_after_a_while_to_the_largest_target_seen() {
        let mut sizing = Sizing::default();
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        // Admission down from 8 to 2 (or 3, for a moment).
        assert_eq!(sizing.resize(8, 2, target(0, 2), at(0)), None);
        assert_eq!(sizing.resize(8, 1, target(2, 1), at(400)), None);
        assert_eq!(sizing.resize(8, 2, target(0, 2), at(800)), None);
        assert_eq!(sizing.resize(8, 2, target(0, 2), at(1_000)), Some(3));
        // A fetch at full prefetch in between starts the count over.
        assert_eq!(sizing.resize(8, 2, target(0, 2), at(2_000)), None);
        assert_eq!(sizing.resize(8, 8, target(0, 8), at(2_500)), None);
        assert_eq!(sizing.resize(8, 2, target(0, 2), at(3_100)), None);
        assert_eq!(sizing.resize(8, 2, target(0, 2), at(3_200)), None);
        assert_eq!(sizing.resize(8, 2, target(0, 2), at(4_100)), Some(2));
    }
}
