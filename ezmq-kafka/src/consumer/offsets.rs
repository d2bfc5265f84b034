//! One partition's offsets as a listener sees them: the records it took
//! and has not finished, and the offset it may commit (the lowest
//! unfinished one), so that jobs finishing out of order never commit
//! past one still running.
//!
//! The commit carries metadata that lets the partition's next owner
//! count deliveries Kafka does not count: which records were handed to
//! a listener (their attempt goes up by one when they run again after a
//! crash or a move), and how many deliveries the lowest unfinished one
//! already had (a job that kills its process every time is the lowest
//! unfinished record, so its attempts keep rising to its limit).

use std::collections::BTreeMap;

/// What a commit said about the records at and past it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Replay {
    /// The committed offset (the lowest record unfinished then).
    lowest: i64,
    /// The deliveries that record had beyond its stored attempt.
    lowest_bump: u32,
    /// Records below this offset had been handed to a listener.
    handed_below: i64,
}

impl Replay {
    const VERSION: &'static str = "ezmq1";

    /// The replay a commit of `offset` with `metadata` describes; `None`
    /// for metadata of another client (or none).
    pub(crate) fn parse(offset: i64, metadata: &str) -> Option<Replay> {
        let mut parts = metadata.split(':');
        if parts.next()? != Self::VERSION {
            return None;
        }
        let handed_below = parts.next()?.parse().ok()?;
        let lowest_bump = parts.next()?.parse().ok()?;
        Some(Replay {
            lowest: offset,
            lowest_bump,
            handed_below,
        })
    }

    /// The deliveries record `offset` had that its headers do not count.
    fn bump(&self, offset: i64) -> u32 {
        if offset >= self.handed_below {
            0
        } else if offset == self.lowest {
            self.lowest_bump.saturating_add(1)
        } else {
            1
        }
    }
}

/// The offsets of one assigned partition.
#[derive(Debug, Default)]
pub(crate) struct PartitionOffsets {
    /// The offset after the last record taken; `None` before the first.
    next: Option<i64>,
    /// The offset after the last record handed to a listener.
    handed_next: Option<i64>,
    /// Records taken (buffered, running or waiting for a retry) and not
    /// finished, with the deliveries each had beyond its stored attempt.
    unfinished: BTreeMap<i64, u32>,
    /// What the previous owner's commit said, if anything.
    replay: Option<Replay>,
    /// The commit last handed to librdkafka's store.
    stored: Option<(i64, String)>,
}

impl PartitionOffsets {
    /// A partition whose previous owner committed `replay`.
    pub(crate) fn resumed(replay: Option<Replay>) -> Self {
        PartitionOffsets {
            replay,
            ..Self::default()
        }
    }

    /// Record `offset` was taken from the partition; the deliveries it
    /// had that its stored attempt does not count.
    pub(crate) fn taken(&mut self, offset: i64) -> u32 {
        let bump = self.replay.map_or(0, |r| r.bump(offset));
        self.unfinished.insert(offset, bump);
        let after = offset.saturating_add(1);
        if self.next.is_none_or(|next| after > next) {
            self.next = Some(after);
        }
        bump
    }

    /// Record `offset` was handed to a listener.
    pub(crate) fn handed(&mut self, offset: i64) {
        let after = offset.saturating_add(1);
        if self.handed_next.is_none_or(|next| after > next) {
            self.handed_next = Some(after);
        }
    }

    /// Record `offset` runs again in place (one more delivery).
    pub(crate) fn retried(&mut self, offset: i64) {
        if let Some(bump) = self.unfinished.get_mut(&offset) {
            *bump = bump.saturating_add(1);
        }
    }

    /// Record `offset` is finished (acknowledged, dead-lettered, or
    /// dropped as expired); false when it was not unfinished.
    pub(crate) fn finished(&mut self, offset: i64) -> bool {
        self.unfinished.remove(&offset).is_some()
    }

    /// The offset a successor would start at: the lowest unfinished
    /// record, or the one after the last taken when every record is
    /// finished; `None` before any record was taken.
    pub(crate) fn committable(&self) -> Option<i64> {
        self.unfinished.keys().next().copied().or(self.next)
    }

    /// The committable offset and its metadata, when either changed
    /// since the last call.
    pub(crate) fn take_unstored(&mut self) -> Option<(i64, String)> {
        let commit = self.commit()?;
        if self.stored.as_ref() == Some(&commit) {
            return None;
        }
        self.stored = Some(commit.clone());
        Some(commit)
    }

    /// The committable offset with its metadata.
    pub(crate) fn commit(&self) -> Option<(i64, String)> {
        let offset = self.committable()?;
        let lowest_bump = self.unfinished.get(&offset).copied().unwrap_or(0);
        let handed_below = self.handed_next.unwrap_or(offset).max(offset);
        Some((
            offset,
            format!("{}:{handed_below}:{lowest_bump}", Replay::VERSION),
        ))
    }

    /// How many records past the lowest unfinished one were taken: what
    /// a crash would run again, at most.
    pub(crate) fn outstanding(&self) -> i64 {
        match (self.unfinished.keys().next(), self.next) {
            (Some(lowest), Some(next)) => next - lowest,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_stop_at_the_lowest_unfinished_record() {
        let mut p = PartitionOffsets::default();
        assert_eq!(p.committable(), None);
        for offset in 10..15 {
            p.taken(offset);
        }
        assert_eq!(p.take_unstored().map(|c| c.0), Some(10));
        assert_eq!(p.take_unstored(), None, "unchanged: nothing new to store");
        // 11, 12 and 14 finish before 10: the commit stays at 10.
        for offset in [11, 12, 14] {
            assert!(p.finished(offset));
        }
        assert_eq!(p.committable(), Some(10));
        assert_eq!(p.outstanding(), 5);
        assert!(p.finished(10));
        assert_eq!(p.take_unstored().map(|c| c.0), Some(13));
        assert!(p.finished(13));
        assert_eq!(
            p.take_unstored().map(|c| c.0),
            Some(15),
            "everything finished: after the last"
        );
        assert_eq!(p.outstanding(), 0);
        assert!(!p.finished(13), "finishing twice changes nothing");
    }

    #[test]
    fn the_next_owner_counts_the_deliveries_before_a_crash() {
        let mut before = PartitionOffsets::default();
        for offset in 0..4 {
            before.taken(offset);
        }
        // 0 and 1 were handed out, 0 was retried in place once; 2 and 3
        // were only buffered.
        before.handed(0);
        before.handed(1);
        before.retried(0);
        let (offset, metadata) = before.take_unstored().unwrap();
        assert_eq!((offset, metadata.as_str()), (0, "ezmq1:2:1"));
        let mut after = PartitionOffsets::resumed(Replay::parse(offset, &metadata));
        assert_eq!(after.taken(0), 2, "its retry and the crashed delivery");
        assert_eq!(after.taken(1), 1);
        assert_eq!(after.taken(2), 0, "never handed out");
        assert_eq!(Replay::parse(5, "from someone else"), None);
    }
}
