//! Queues: jobs ordered by creation time, blocked clients, pause state.

use crate::job::QName;
use crate::jobtable::Key;
use bytes::Bytes;
use std::collections::{BTreeSet, VecDeque};

/// A named queue.
#[derive(Debug)]
pub(crate) struct Queue {
    pub(crate) name: Bytes,
    /// The name as held by the jobs of the queue (interned).
    pub(crate) shared: QName,
    /// The queued jobs: `key(ctime, slot)`, oldest first.
    pub(crate) jobs: BTreeSet<Key>,
    /// IDs of blocked GETJOB waiters, in blocking order.
    pub(crate) blocked: VecDeque<u64>,
    pub(crate) paused_in: bool,
    pub(crate) paused_out: bool,
    /// Creation time, unix seconds.
    pub(crate) ctime: u64,
    /// Last access time, unix seconds.
    pub(crate) atime: u64,
    pub(crate) jobs_in: u64,
    pub(crate) jobs_out: u64,
    /// Scan sequence number (QSCAN cursor order).
    pub(crate) seq: u64,
    /// Cluster only: bus indexes of the nodes jobs were imported from.
    pub(crate) import_from: Vec<u16>,
    /// Cluster only: imports counted per second (`import-rate`): the
    /// second, the jobs imported in it, and in the second before.
    pub(crate) imports: (u64, u32, u32),
}

impl Queue {
    /// A new empty queue.
    pub(crate) fn new(name: Bytes, shared: QName, now_s: u64, seq: u64) -> Queue {
        Queue {
            name,
            shared,
            jobs: BTreeSet::new(),
            blocked: VecDeque::new(),
            paused_in: false,
            paused_out: false,
            ctime: now_s,
            atime: now_s,
            jobs_in: 0,
            jobs_out: 0,
            seq,
            import_from: Vec::new(),
            imports: (0, 0, 0),
        }
    }

    /// Counts one imported job at unix second `now_s`.
    pub(crate) fn count_import(&mut self, now_s: u64) {
        let (sec, this, _) = self.imports;
        self.imports = match now_s.saturating_sub(sec) {
            0 => (sec, this + 1, self.imports.2),
            1 => (now_s, 1, this),
            _ => (now_s, 1, 0),
        };
    }

    /// Jobs imported per second lately (the busier of this second and the
    /// one before).
    pub(crate) fn import_rate(&self, now_s: u64) -> u32 {
        let (sec, this, prev) = self.imports;
        match now_s.saturating_sub(sec) {
            0 => this.max(prev),
            1 => this,
            _ => 0,
        }
    }

    /// Number of queued jobs.
    pub(crate) fn len(&self) -> usize {
        self.jobs.len()
    }

    /// The pause state name: none/in/out/all.
    pub(crate) fn pause_name(&self) -> &'static str {
        pause_name(self.paused_in, self.paused_out)
    }
}

/// Pause state name for the given flags.
pub(crate) fn pause_name(pin: bool, pout: bool) -> &'static str {
    match (pin, pout) {
        (false, false) => "none",
        (true, false) => "in",
        (false, true) => "out",
        (true, true) => "all",
    }
}
