//! Server statistics (INFO stats, commandstats) and the slow log.

use crate::cmd::table::COMMANDS;
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Largest number of arguments kept per slow log entry.
const SLOWLOG_MAX_ARGS: usize = 32;
/// Longest argument kept in a slow log entry.
const SLOWLOG_MAX_ARG_BYTES: usize = 128;

/// Counters of one node.
#[derive(Debug)]
pub(crate) struct Stats {
    pub(crate) connections_received: AtomicU64,
    pub(crate) rejected_connections: AtomicU64,
    pub(crate) commands_processed: AtomicU64,
    /// Per command of the table: calls and microseconds.
    calls: Vec<(AtomicU64, AtomicU64)>,
    pub(crate) peak_memory: AtomicUsize,
}

impl Stats {
    /// Zeroed counters.
    pub(crate) fn new() -> Stats {
        Stats {
            connections_received: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            commands_processed: AtomicU64::new(0),
            calls: COMMANDS
                .iter()
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            peak_memory: AtomicUsize::new(0),
        }
    }

    /// Counts one call of command `idx` that took `usec`.
    pub(crate) fn record(&self, idx: usize, usec: u64) {
        self.commands_processed.fetch_add(1, Ordering::Relaxed);
        if let Some((calls, time)) = self.calls.get(idx) {
            calls.fetch_add(1, Ordering::Relaxed);
            time.fetch_add(usec, Ordering::Relaxed);
        }
    }

    /// `(name, calls, usec)` of every command called at least once.
    pub(crate) fn per_command(&self) -> Vec<(&'static str, u64, u64)> {
        COMMANDS
            .iter()
            .zip(&self.calls)
            .filter_map(|(c, (n, t))| {
                let n = n.load(Ordering::Relaxed);
                (n > 0).then(|| (c.name, n, t.load(Ordering::Relaxed)))
            })
            .collect()
    }
}

/// One slow log entry.
#[derive(Debug, Clone)]
pub(crate) struct SlowEntry {
    pub(crate) id: u64,
    pub(crate) time_s: u64,
    pub(crate) usec: u64,
    pub(crate) args: Vec<Bytes>,
}

/// Commands slower than a threshold, newest first.
#[derive(Debug)]
pub(crate) struct SlowLog {
    /// Threshold in microseconds; negative = off (`slowlog-log-slower-than`).
    pub(crate) slower_than: AtomicI64,
    /// Entries kept (`slowlog-max-len`).
    pub(crate) max_len: AtomicUsize,
    entries: Mutex<(u64, VecDeque<SlowEntry>)>,
}

impl SlowLog {
    /// Redis' defaults: 10 ms, 128 entries.
    pub(crate) fn new() -> SlowLog {
        SlowLog {
            slower_than: AtomicI64::new(10_000),
            max_len: AtomicUsize::new(128),
            entries: Mutex::new((0, VecDeque::new())),
        }
    }

    /// Logs the command when it took at least the threshold.
    pub(crate) fn maybe_log(&self, args: &[Bytes], usec: u64, now_s: impl FnOnce() -> u64) {
        let t = self.slower_than.load(Ordering::Relaxed);
        if t < 0 || (usec as i64) < t {
            return;
        }
        let now_s = now_s();
        let mut kept: Vec<Bytes> = args
            .iter()
            .take(SLOWLOG_MAX_ARGS)
            .map(|a| {
                if a.len() > SLOWLOG_MAX_ARG_BYTES {
                    let more = a.len() - SLOWLOG_MAX_ARG_BYTES;
                    let mut v = a[..SLOWLOG_MAX_ARG_BYTES].to_vec();
                    v.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
                    Bytes::from(v)
                } else {
                    Bytes::copy_from_slice(a)
                }
            })
            .collect();
        if args.len() > SLOWLOG_MAX_ARGS {
            kept[SLOWLOG_MAX_ARGS - 1] = Bytes::from(format!(
                "... ({} more arguments)",
                args.len() - SLOWLOG_MAX_ARGS + 1
            ));
        }
        let max = self.max_len.load(Ordering::Relaxed);
        let mut e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let id = e.0;
        e.0 += 1;
        e.1.push_front(SlowEntry {
            id,
            time_s: now_s,
            usec,
            args: kept,
        });
        e.1.truncate(max);
    }

    /// The newest `n` entries.
    pub(crate) fn get(&self, n: usize) -> Vec<SlowEntry> {
        let e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        e.1.iter().take(n).cloned().collect()
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .len()
    }

    /// Removes every entry.
    pub(crate) fn reset(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clear();
    }

    /// Applies a new `slowlog-max-len`.
    pub(crate) fn set_max_len(&self, n: usize) {
        self.max_len.store(n, Ordering::Relaxed);
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .truncate(n);
    }
}
