//! Delayed jobs: 18 delay-level topics shared by every topic, and the
//! mover that takes a record out of its level when its wait ends.
//!
//! Level `k` is the topic `<prefix>.d.<2^k>`: every record in it waits
//! `2^k` seconds (or less, up to its run time), so a level's records come
//! due in the order they were written, and the mover reads each partition
//! only as far ahead as a second. A job pushed with a delay `r` goes to
//! level `⌊log₂ r⌋` (0 under two seconds); when its level's wait ends the
//! mover writes it to the level of what is left, or to its destination
//! once its run time has come. A delivery is therefore never early (by
//! the moving client's clock) and takes at most 1 + the one bits of the
//! delay in seconds hops.

pub(crate) mod mover;

use std::time::Duration;

use ezmq_core::job_meta::RUN_AT_HEADER;
use ezmq_core::Headers;

use crate::names;

/// How many levels: 1 s up to 2¹⁷ s (36 h); a longer wait passes the top
/// level more than once.
pub(crate) const LEVELS: u32 = 18;

/// The Kafka header naming a delayed record's destination topic.
pub(crate) const DEST_HEADER: &str = "ezmq-dest";

/// The Kafka header with the end of a delayed record's wait in its
/// level, in Unix milliseconds.
pub(crate) const LEVEL_DUE_HEADER: &str = "ezmq-level-due";

/// How far ahead of a record's due time the mover reads it.
pub(crate) const READ_AHEAD: Duration = Duration::from_secs(1);

/// The level of a wait of `remaining_ms` (more than zero).
pub(crate) fn level_of(remaining_ms: u64) -> u32 {
    let seconds = remaining_ms / 1000;
    if seconds == 0 {
        0
    } else {
        (u64::BITS - 1 - seconds.leading_zeros()).min(LEVELS - 1)
    }
}

/// The topic of level `k`: `<prefix>.d.<2^k>`.
pub(crate) fn level_topic(prefix: &str, k: u32) -> String {
    names::name(prefix, "d", &[&(1u64 << k).to_string()])
}

/// Every level's topic, level 0 first.
pub(crate) fn level_topics(prefix: &str) -> Vec<String> {
    (0..LEVELS).map(|k| level_topic(prefix, k)).collect()
}

/// Where a record to run at `run_at_ms` goes at `now_ms`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Hop {
    /// Its run time has come: to its destination.
    Destination,
    /// Into level topic `topic`, due at `due_ms`.
    Level { topic: String, due_ms: u64 },
}

/// The next hop of a record to run at `run_at_ms`.
pub(crate) fn next_hop(prefix: &str, run_at_ms: u64, now_ms: u64) -> Hop {
    if run_at_ms <= now_ms {
        return Hop::Destination;
    }
    let k = level_of(run_at_ms - now_ms);
    Hop::Level {
        topic: level_topic(prefix, k),
        due_ms: now_ms.saturating_add(1000 << k).min(run_at_ms),
    }
}

/// When a job pushed at `now_ms` with `delay` runs: core's stamped run
/// time when the headers have it, else `now_ms + delay`.
pub(crate) fn run_at_ms(headers: &Headers, delay: Duration, now_ms: u64) -> u64 {
    headers
        .get(RUN_AT_HEADER)
        .and_then(|at| at.parse().ok())
        .unwrap_or_else(|| {
            now_ms.saturating_add(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_cover_one_second_to_the_top() {
        assert_eq!(level_of(1), 0);
        assert_eq!(level_of(1999), 0);
        assert_eq!(level_of(2000), 1);
        assert_eq!(level_of(3999), 1);
        assert_eq!(level_of(4000), 2);
        assert_eq!(level_of(3_600_000), 11);
        assert_eq!(level_of(u64::MAX), LEVELS - 1);
        assert_eq!(level_topic("ezmq", 0), "ezmq.d.1");
        assert_eq!(level_topic("ezmq", 17), "ezmq.d.131072");
        assert_eq!(level_topics("p").len(), 18);
    }

    #[test]
    fn a_hop_never_waits_past_the_run_time() {
        assert_eq!(next_hop("p", 1000, 1000), Hop::Destination);
        assert_eq!(next_hop("p", 900, 1000), Hop::Destination);
        assert_eq!(
            next_hop("p", 1500, 1000),
            Hop::Level {
                topic: "p.d.1".into(),
                due_ms: 1500
            }
        );
        // 10.5 s: level 3 (8 s), then 2.5 s: level 1 (2 s), then 0.5 s.
        assert_eq!(
            next_hop("p", 11_500, 1000),
            Hop::Level {
                topic: "p.d.8".into(),
                due_ms: 9000
            }
        );
        assert_eq!(
            next_hop("p", 11_500, 9000),
            Hop::Level {
                topic: "p.d.2".into(),
                due_ms: 11_000
            }
        );
        assert_eq!(
            next_hop("p", 11_500, 11_000),
            Hop::Level {
                topic: "p.d.1".into(),
                due_ms: 11_500
            }
        );
    }
}
