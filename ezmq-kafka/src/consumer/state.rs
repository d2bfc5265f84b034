//! What one topic's consumer holds: the buffered records, the retries
//! waiting for their backoff, each assigned partition's offsets, and the
//! keys whose record is running.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use bytes::Bytes;

use super::offsets::{PartitionOffsets, Replay};
use super::record::{now_ms, Record};

/// One assigned partition.
#[derive(Debug)]
struct Partition {
    /// Which assignment this is (a partition that moves away and back
    /// is a new one).
    generation: u64,
    offsets: PartitionOffsets,
    /// Records handed to the listener and not settled.
    running: usize,
    /// Fetching is paused (buffer full, or too far past the oldest
    /// unfinished record).
    paused: bool,
}

/// The consumer's state, under [`Shared`](super::Shared)'s lock.
#[derive(Debug, Default)]
pub(crate) struct State {
    buffer: VecDeque<Record>,
    /// In-place retries, each due at its instant.
    delayed: Vec<(Instant, Record)>,
    partitions: HashMap<i32, Partition>,
    generation: u64,
    /// A listener receives (the member should be in the group).
    pub(crate) wanted: bool,
    /// A consumer error for the next receive to report.
    pub(crate) failure: Option<String>,
    /// The largest `max` a receive asked for: the buffer holds twice it.
    largest_max: usize,
    /// Each key with a record handed out or waiting for its retry, by
    /// partition: that record's offset. Later records of the key wait.
    busy_keys: HashMap<(i32, Bytes), i64>,
}

/// A partition's offset to commit, with its metadata.
pub(crate) type Commit = (i32, i64, String);

/// What the thread should do about fetching.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct FlowChange {
    pub(crate) pause: Vec<i32>,
    pub(crate) resume: Vec<i32>,
}

impl State {
    /// Partitions were assigned to this member, each with what its
    /// previous owner's commit said.
    pub(crate) fn assigned(&mut self, partitions: &[(i32, Option<Replay>)]) {
        for &(partition, replay) in partitions {
            self.generation += 1;
            self.partitions.insert(
                partition,
                Partition {
                    generation: self.generation,
                    offsets: PartitionOffsets::resumed(replay),
                    running: 0,
                    paused: false,
                },
            );
        }
    }

    /// The assignment generation of `partition`, for records taken now;
    /// `None` when it is not assigned (a record fetched before a revoke).
    pub(crate) fn generation_of(&self, partition: i32) -> Option<u64> {
        self.partitions.get(&partition).map(|p| p.generation)
    }

    /// A record was fetched.
    pub(crate) fn add(&mut self, mut record: Record) {
        if let Some(p) = self.partitions.get_mut(&record.partition) {
            if p.generation == record.generation {
                let bump = p.offsets.taken(record.offset);
                record.attempt = record.attempt.saturating_add(bump);
                self.buffer.push_back(record);
            }
        }
    }

    /// Up to `max` records to hand out (due retries first, then the
    /// buffer); records past their ttl are finished and left out. Also
    /// when the next retry is due.
    pub(crate) fn take(&mut self, max: usize, now: Instant) -> (Vec<Record>, Option<Instant>) {
        self.largest_max = self.largest_max.max(max);
        let mut i = 0;
        while i < self.delayed.len() {
            if self.delayed[i].0 <= now {
                let (_, record) = self.delayed.swap_remove(i);
                self.buffer.push_front(record);
            } else {
                i += 1;
            }
        }
        let now_ms = now_ms();
        let mut out = Vec::new();
        // Records of a busy key, kept in order for a later take.
        let mut waiting = Vec::new();
        while out.len() < max {
            let Some(record) = self.buffer.pop_front() else {
                break;
            };
            let Some(p) = self.partitions.get_mut(&record.partition) else {
                continue;
            };
            if p.generation != record.generation {
                continue;
            }
            if let Some(key) = &record.key {
                let slot = (record.partition, key.clone());
                match self.busy_keys.get(&slot) {
                    Some(holder) if *holder != record.offset => {
                        waiting.push(record);
                        continue;
                    }
                    Some(_) => {}
                    None => {
                        self.busy_keys.insert(slot, record.offset);
                    }
                }
            }
            if record.expired(now_ms) {
                tracing::debug!(message_id = %record.id, partition = record.partition, offset = record.offset, "job expired before delivery; dropped");
                p.offsets.finished(record.offset);
                Self::free_key(&mut self.busy_keys, &record);
                continue;
            }
            p.running += 1;
            p.offsets.handed(record.offset);
            out.push(record);
        }
        for record in waiting.into_iter().rev() {
            self.buffer.push_front(record);
        }
        let next_due = self.delayed.iter().map(|(due, _)| *due).min();
        (out, next_due)
    }

    /// The handed-out record is finished: `false` when its partition
    /// moved away since (another member has it now).
    pub(crate) fn finish(&mut self, record: &Record) -> bool {
        match self.settled(record) {
            Some(p) => {
                p.offsets.finished(record.offset);
                Self::free_key(&mut self.busy_keys, record);
                true
            }
            None => false,
        }
    }

    /// The handed-out record goes back to the front of the buffer (it
    /// keeps its key: nothing of the key ran meanwhile).
    pub(crate) fn release(&mut self, record: Record) -> bool {
        if self.settled(&record).is_none() {
            return false;
        }
        self.buffer.push_front(record);
        true
    }

    /// `record`'s key is free again, if `record` held it.
    fn free_key(busy_keys: &mut HashMap<(i32, Bytes), i64>, record: &Record) {
        if let Some(key) = &record.key {
            let slot = (record.partition, key.clone());
            if busy_keys.get(&slot) == Some(&record.offset) {
                busy_keys.remove(&slot);
            }
        }
    }

    /// The handed-out record runs again at `due` (an in-place retry).
    pub(crate) fn delay(&mut self, record: Record, due: Instant) -> bool {
        let Some(p) = self.settled(&record) else {
            return false;
        };
        p.offsets.retried(record.offset);
        self.delayed.push((due, record));
        true
    }

    /// The partition of a settled record, when it is still assigned
    /// under the record's generation; its running count goes down.
    fn settled(&mut self, record: &Record) -> Option<&mut Partition> {
        let p = self.partitions.get_mut(&record.partition)?;
        if p.generation != record.generation {
            return None;
        }
        p.running = p.running.saturating_sub(1);
        Some(p)
    }

    /// True while the record's partition is still assigned under its
    /// generation.
    pub(crate) fn owns(&self, record: &Record) -> bool {
        self.partitions
            .get(&record.partition)
            .is_some_and(|p| p.generation == record.generation)
    }

    /// Records handed out and not settled, in `partitions` (all when
    /// `None`).
    pub(crate) fn running(&self, partitions: Option<&[i32]>) -> usize {
        self.partitions
            .iter()
            .filter(|(id, _)| partitions.is_none_or(|list| list.contains(id)))
            .map(|(_, p)| p.running)
            .sum()
    }

    /// The offsets to store (lowest unfinished per partition, with their
    /// metadata) that changed since they were last stored.
    pub(crate) fn take_unstored(&mut self) -> Vec<Commit> {
        self.partitions
            .iter_mut()
            .filter_map(|(id, p)| {
                p.offsets
                    .take_unstored()
                    .map(|(offset, metadata)| (*id, offset, metadata))
            })
            .collect()
    }

    /// The partitions leave this member: their buffered records and
    /// waiting retries are dropped (the next owner starts at the lowest
    /// unfinished offset, stored before this); returns that offset of
    /// each partition that had one.
    pub(crate) fn revoked(&mut self, partitions: &[i32]) -> Vec<Commit> {
        self.buffer.retain(|r| !partitions.contains(&r.partition));
        self.delayed
            .retain(|(_, r)| !partitions.contains(&r.partition));
        self.busy_keys
            .retain(|(partition, _), _| !partitions.contains(partition));
        let mut commits = Vec::new();
        for partition in partitions {
            if let Some(p) = self.partitions.remove(partition) {
                if let Some((offset, metadata)) = p.offsets.commit() {
                    commits.push((*partition, offset, metadata));
                }
            }
        }
        commits
    }

    /// Every partition leaves (the member left the group or lost its
    /// assignment).
    pub(crate) fn clear(&mut self) {
        self.buffer.clear();
        self.delayed.clear();
        self.partitions.clear();
        self.busy_keys.clear();
    }

    /// True while the buffer holds twice the largest receive (at least
    /// 64 records): the thread then polls only to keep the member alive.
    pub(crate) fn full(&self) -> bool {
        self.buffer.len() >= (self.largest_max * 2).max(64)
    }

    /// Which partitions to pause or resume: one pauses while it is
    /// `window` records past its oldest unfinished one, and resumes at
    /// half. (A full buffer pauses nothing: pausing drops what librdkafka
    /// fetched ahead, which it would fetch again.)
    pub(crate) fn flow(&mut self, window: u32) -> FlowChange {
        let window = i64::from(window);
        let mut change = FlowChange::default();
        for (id, p) in &mut self.partitions {
            let outstanding = p.offsets.outstanding();
            if !p.paused && outstanding >= window {
                p.paused = true;
                change.pause.push(*id);
            } else if p.paused && outstanding < window / 2 {
                p.paused = false;
                change.resume.push(*id);
            }
        }
        change
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ezmq_core::{Headers, JobId};

    fn record(state: &mut State, partition: i32, offset: i64) -> Record {
        Record {
            partition,
            offset,
            generation: state.generation_of(partition).unwrap(),
            id: JobId::new(format!("{partition}-{offset}")),
            key: None,
            headers: Headers::new(),
            body: Bytes::new(),
            attempt: 1,
            expires_ms: None,
        }
    }

    #[test]
    fn a_settle_after_the_partition_moved_changes_nothing() {
        let mut state = State::default();
        state.assigned(&[(0, None)]);
        let r = record(&mut state, 0, 5);
        state.add(r);
        let (taken, _) = state.take(10, Instant::now());
        assert_eq!(taken.len(), 1);
        assert_eq!(state.running(None), 1);
        assert_eq!(state.revoked(&[0]), vec![(0, 5, "ezmq1:6:0".to_owned())]);
        state.assigned(&[(0, None)]);
        assert!(!state.finish(&taken[0]), "the old assignment's record");
        assert_eq!(state.take_unstored(), Vec::new());
    }

    #[test]
    fn released_and_retried_records_come_back() {
        let mut state = State::default();
        state.assigned(&[(1, None)]);
        for offset in 0..3 {
            let r = record(&mut state, 1, offset);
            state.add(r);
        }
        let now = Instant::now();
        let (taken, _) = state.take(2, now);
        assert_eq!(taken.iter().map(|r| r.offset).collect::<Vec<_>>(), [0, 1]);
        assert!(state.release(taken[1].clone()));
        let later = now + std::time::Duration::from_secs(1);
        assert!(state.delay(taken[0].clone(), later));
        let (next, due) = state.take(10, now);
        assert_eq!(next.iter().map(|r| r.offset).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(due, Some(later));
        let (retried, _) = state.take(10, later);
        assert_eq!(retried.iter().map(|r| r.offset).collect::<Vec<_>>(), [0]);
        assert_eq!(state.take_unstored(), vec![(1, 0, "ezmq1:3:1".to_owned())]);
    }

    #[test]
    fn a_partition_far_past_its_oldest_unfinished_record_pauses() {
        let mut state = State::default();
        state.assigned(&[(0, None)]);
        for offset in 0..64 {
            let r = record(&mut state, 0, offset);
            state.add(r);
        }
        assert!(state.full(), "64 buffered, no receive yet");
        assert_eq!(state.flow(1_000), FlowChange::default());
        assert_eq!(state.flow(64).pause, vec![0]);
        let (taken, _) = state.take(40, Instant::now());
        assert!(!state.full(), "24 buffered of a cap of 80");
        for r in &taken {
            state.finish(r);
        }
        // 24 records past the oldest unfinished (40) of a window of 64.
        assert_eq!(state.flow(64).resume, vec![0]);
    }

    fn keyed(state: &mut State, partition: i32, offset: i64, key: &'static str) -> Record {
        Record {
            key: Some(Bytes::from_static(key.as_bytes())),
            ..record(state, partition, offset)
        }
    }

    fn offsets(records: &[Record]) -> Vec<i64> {
        records.iter().map(|r| r.offset).collect()
    }

    #[test]
    fn a_key_runs_one_record_at_a_time_in_order_retries_included() {
        let mut state = State::default();
        state.assigned(&[(0, None)]);
        for (offset, key) in [(0, "a"), (1, "a"), (2, "b"), (3, "a"), (4, "b")] {
            let r = keyed(&mut state, 0, offset, key);
            state.add(r);
        }
        let unkeyed = record(&mut state, 0, 5);
        state.add(unkeyed);
        let now = Instant::now();
        let (first, _) = state.take(10, now);
        assert_eq!(
            offsets(&first),
            [0, 2, 5],
            "one of each key, and the unkeyed one"
        );
        // `a`'s first record fails: its retry holds the key.
        let later = now + std::time::Duration::from_secs(1);
        assert!(state.delay(first[0].clone(), later));
        assert!(state.finish(&first[1]));
        let (second, _) = state.take(10, now);
        assert_eq!(offsets(&second), [4], "b's next; a waits for its retry");
        let (retry, _) = state.take(10, later);
        assert_eq!(offsets(&retry), [0], "a's retry, before a's later records");
        assert!(state.finish(&retry[0]));
        let (third, _) = state.take(10, later);
        assert_eq!(offsets(&third), [1]);
        assert!(state.finish(&third[0]));
        let (fourth, _) = state.take(10, later);
        assert_eq!(offsets(&fourth), [3]);
    }

    #[test]
    fn a_revoked_partition_frees_its_keys() {
        let mut state = State::default();
        state.assigned(&[(0, None)]);
        let r = keyed(&mut state, 0, 0, "a");
        state.add(r);
        let (taken, _) = state.take(10, Instant::now());
        assert_eq!(offsets(&taken), [0]);
        state.revoked(&[0]);
        state.assigned(&[(0, None)]);
        let again = keyed(&mut state, 0, 0, "a");
        state.add(again);
        let (taken, _) = state.take(10, Instant::now());
        assert_eq!(offsets(&taken), [0], "the new assignment runs the key");
    }
}
