//! The job table: every job stored once, in a slab, found by id through a
//! compact open-addressing index.
//!
//! Queues and timers refer to jobs by their slab slot (a `u32`), so a job's
//! 40-byte id is stored once instead of once per index, and the id index
//! costs 8 bytes per bucket (slot + hash tag) instead of a `HashMap` entry
//! holding the id and a boxed job. A slot is only reused after its job was
//! removed from every queue and timer (see `Store::delete_job`).

use crate::job::{Job, JobId};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// A slab slot number.
pub(crate) type Slot = u32;

/// An ordered `(time, slot)` key of a queue or the timer set, packed in
/// 12 bytes (a `(u64, u32)` tuple takes 16).
pub(crate) type Key = [u32; 3];

/// The key for `time` and `slot`.
pub(crate) fn key(time: u64, slot: Slot) -> Key {
    [(time >> 32) as u32, time as u32, slot]
}

/// The time of a key.
pub(crate) fn key_time(k: &Key) -> u64 {
    (u64::from(k[0]) << 32) | u64::from(k[1])
}

/// The slot of a key.
pub(crate) fn key_slot(k: &Key) -> Slot {
    k[2]
}

const EMPTY: u32 = u32::MAX;
const MIN_BUCKETS: usize = 16;

/// One index bucket: the slot of a job and the low 32 bits of its id's
/// hash (the bucket it belongs to is derived from them).
#[derive(Debug, Clone, Copy)]
struct Bucket {
    slot: u32,
    tag: u32,
}

const VACANT: Bucket = Bucket {
    slot: EMPTY,
    tag: 0,
};

/// Jobs by id and by slot.
#[derive(Debug)]
pub(crate) struct JobTable {
    slab: Vec<Option<Job>>,
    free: Vec<Slot>,
    index: Vec<Bucket>,
    len: usize,
    seed: u64,
}

impl Default for JobTable {
    fn default() -> Self {
        Self::new()
    }
}

impl JobTable {
    /// An empty table.
    pub(crate) fn new() -> JobTable {
        let mut h = RandomState::new().build_hasher();
        h.write_u8(0);
        JobTable {
            slab: Vec::new(),
            free: Vec::new(),
            index: vec![VACANT; MIN_BUCKETS],
            len: 0,
            seed: h.finish() | 1,
        }
    }

    fn hash(&self, id: &JobId) -> u32 {
        let b = id.as_bytes();
        let mut h = self.seed;
        for chunk in b.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            h ^= h >> 29;
        }
        (h ^ (h >> 32)) as u32
    }

    fn mask(&self) -> usize {
        self.index.len() - 1
    }

    /// Index position of `id`, if present.
    fn find(&self, id: &JobId) -> Option<usize> {
        let tag = self.hash(id);
        let mask = self.mask();
        let mut i = tag as usize & mask;
        loop {
            let b = self.index[i];
            if b.slot == EMPTY {
                return None;
            }
            if b.tag == tag
                && self.slab[b.slot as usize]
                    .as_ref()
                    .is_some_and(|j| j.id == *id)
            {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    fn place(index: &mut [Bucket], b: Bucket) {
        let mask = index.len() - 1;
        let mut i = b.tag as usize & mask;
        while index[i].slot != EMPTY {
            i = (i + 1) & mask;
        }
        index[i] = b;
    }

    fn grow(&mut self) {
        let mut index = vec![VACANT; self.index.len() * 2];
        for b in self.index.iter().filter(|b| b.slot != EMPTY) {
            Self::place(&mut index, *b);
        }
        self.index = index;
    }

    /// Number of jobs.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The slot of a job.
    pub(crate) fn slot_of(&self, id: &JobId) -> Option<Slot> {
        self.find(id).map(|i| self.index[i].slot)
    }

    /// The job with this id.
    pub(crate) fn get(&self, id: &JobId) -> Option<&Job> {
        let slot = self.slot_of(id)?;
        self.slab[slot as usize].as_ref()
    }

    /// The job with this id, mutable.
    pub(crate) fn get_mut(&mut self, id: &JobId) -> Option<&mut Job> {
        let slot = self.slot_of(id)?;
        self.slab[slot as usize].as_mut()
    }

    /// True when a job with this id is stored.
    pub(crate) fn contains_key(&self, id: &JobId) -> bool {
        self.find(id).is_some()
    }

    /// The job in `slot`.
    pub(crate) fn at(&self, slot: Slot) -> Option<&Job> {
        self.slab.get(slot as usize).and_then(Option::as_ref)
    }

    /// The job in `slot`, mutable.
    pub(crate) fn at_mut(&mut self, slot: Slot) -> Option<&mut Job> {
        self.slab.get_mut(slot as usize).and_then(Option::as_mut)
    }

    /// The id of the job in `slot` (a default id when the slot is empty,
    /// which queues and timers never refer to).
    pub(crate) fn id_at(&self, slot: Slot) -> JobId {
        self.at(slot).map_or(JobId([0; 40]), |j| j.id)
    }

    /// Stores a job (replacing one with the same id) and returns its slot.
    pub(crate) fn insert(&mut self, job: Job) -> Slot {
        if let Some(i) = self.find(&job.id) {
            let slot = self.index[i].slot;
            self.slab[slot as usize] = Some(job);
            return slot;
        }
        if (self.len + 1) * 4 > self.index.len() * 3 {
            self.grow();
        }
        let tag = self.hash(&job.id);
        let slot = match self.free.pop() {
            Some(s) => {
                self.slab[s as usize] = Some(job);
                s
            }
            None => {
                self.slab.push(Some(job));
                (self.slab.len() - 1) as Slot
            }
        };
        Self::place(&mut self.index, Bucket { slot, tag });
        self.len += 1;
        slot
    }

    /// Removes a job; its slot becomes free.
    pub(crate) fn remove(&mut self, id: &JobId) -> Option<Job> {
        let mut i = self.find(id)?;
        let slot = self.index[i].slot;
        // Backward-shift deletion (linear probing).
        let mask = self.mask();
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let b = self.index[j];
            if b.slot == EMPTY {
                break;
            }
            let home = b.tag as usize & mask;
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(i) & mask) {
                self.index[i] = b;
                i = j;
            }
        }
        self.index[i] = VACANT;
        self.len -= 1;
        let job = self.slab[slot as usize].take();
        if slot as usize + 1 == self.slab.len() {
            self.slab.pop();
        } else {
            self.free.push(slot);
        }
        job
    }

    /// Every job, in slot order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Job> {
        self.slab.iter().filter_map(Option::as_ref)
    }

    /// `(slot, job)` from slot `start` on, in slot order (JSCAN).
    pub(crate) fn scan_from(&self, start: u64) -> impl Iterator<Item = (u64, &Job)> {
        let start = usize::try_from(start).unwrap_or(usize::MAX);
        self.slab
            .iter()
            .enumerate()
            .skip(start)
            .filter_map(|(s, j)| j.as_ref().map(|j| (s as u64, j)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Rng;

    fn job(id: JobId) -> Job {
        Job::new(
            id,
            crate::job::QName::from(&[][..]),
            crate::body::Body::copy_from(b""),
            1,
            0,
            0,
            0,
            0,
        )
    }

    #[test]
    fn insert_find_remove_many() {
        let mut rng = Rng::new();
        let mut t = JobTable::new();
        let ids: Vec<JobId> = (0..5000)
            .map(|_| JobId::generate(b"abcdef01", &mut rng, 3600, 1))
            .collect();
        for id in &ids {
            t.insert(job(*id));
        }
        assert_eq!(t.len(), ids.len());
        for (k, id) in ids.iter().enumerate() {
            if k % 3 == 0 {
                assert!(t.remove(id).is_some());
            }
        }
        for (k, id) in ids.iter().enumerate() {
            assert_eq!(t.contains_key(id), k % 3 != 0, "job {k}");
            if let Some(s) = t.slot_of(id) {
                assert_eq!(t.id_at(s), *id);
            }
        }
        // Freed slots are reused.
        let before = t.slab.len();
        for _ in 0..100 {
            t.insert(job(JobId::generate(b"abcdef01", &mut rng, 3600, 1)));
        }
        assert_eq!(t.slab.len(), before);
        assert_eq!(t.values().count(), t.len());
    }
}
