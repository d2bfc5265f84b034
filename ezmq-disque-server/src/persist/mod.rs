//! Persistence: an append-only log of job changes (Disque's `appendonly
//! yes` model), replayed on start, compacted in the background.
//!
//! * `record.rs`: the framed, CRC-checked records;
//! * `writer.rs`: the thread that writes (and fsyncs) what commands append;
//! * `load.rs`: reading the log on start (a torn tail is dropped);
//! * `rewrite.rs`: background compaction (BGREWRITEAOF, automatic).
//!
//! Commands append records to an in-memory buffer under the store lock, so
//! the log order is the order in which changes were applied. A connection
//! sends its replies only once the writer thread has written its records
//! (and, with `appendfsync always`, fsynced them): a job a client was told
//! about survives a `kill -9` with every policy, and a machine crash with
//! `always`.

pub(crate) mod load;
pub(crate) mod record;
pub(crate) mod rewrite;
pub(crate) mod writer;

use crate::job::{Job, JobId};
use record::StateFields;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use tokio::sync::watch;

/// Name of the log file inside the data directory.
pub(crate) const AOF_FILE: &str = "appendonly.aof";
/// Name of the file keeping the node id inside the data directory.
pub(crate) const NODE_ID_FILE: &str = "node-id";
/// Automatic rewrite once the log is this big and twice its size after the
/// last rewrite (Redis' `auto-aof-rewrite-min-size` / `-percentage 100`).
pub(crate) const AUTO_REWRITE_MIN_BYTES: u64 = 64 * 1024 * 1024;

/// When the log is flushed to disk (`appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum AppendFsync {
    /// fsync before replying: nothing acknowledged is lost, even when the
    /// machine crashes.
    Always = 0,
    /// fsync once per second: a machine crash loses up to about the last
    /// second; a killed process loses nothing (the default).
    #[default]
    EverySec = 1,
    /// Leave flushing to the operating system.
    No = 2,
}

impl AppendFsync {
    /// The name used by `--appendfsync` and `CONFIG GET appendfsync`.
    pub fn as_str(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::EverySec => "everysec",
            AppendFsync::No => "no",
        }
    }
}

impl std::fmt::Display for AppendFsync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown `appendfsync` policy name.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid appendfsync policy {0:?}: expected always, everysec or no")]
pub struct ParseAppendFsyncError(String);

impl std::str::FromStr for AppendFsync {
    type Err = ParseAppendFsyncError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Ok(AppendFsync::Always),
            "everysec" => Ok(AppendFsync::EverySec),
            "no" => Ok(AppendFsync::No),
            _ => Err(ParseAppendFsyncError(s.to_string())),
        }
    }
}

/// What commands appended and the writer has not taken yet.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// Records not written yet.
    pub(crate) buf: Vec<u8>,
    /// Bytes appended since start (a logical offset).
    pub(crate) appended: u64,
    /// While a rewrite runs: every record appended since its snapshot.
    pub(crate) diff: Option<Vec<u8>>,
    /// A finished rewrite: the file to write to from now on, and its size.
    pub(crate) swap: Option<(std::fs::File, u64)>,
    /// The writer stopped (shutdown): a rewrite must not swap files.
    pub(crate) stopped: bool,
}

/// Counters shown by `INFO persistence`.
#[derive(Debug, Default)]
pub(crate) struct AofStats {
    pub(crate) current_size: AtomicU64,
    pub(crate) base_size: AtomicU64,
    pub(crate) rewrite_in_progress: AtomicBool,
    pub(crate) rewrite_scheduled: AtomicBool,
    pub(crate) last_rewrite_failed: AtomicBool,
    pub(crate) last_write_failed: AtomicBool,
    pub(crate) rewrite_started_ms: AtomicU64,
    pub(crate) last_rewrite_ms: AtomicU64,
    pub(crate) rewrites: AtomicU64,
    pub(crate) loaded_jobs: AtomicU64,
    pub(crate) dropped_bytes: AtomicU64,
}

/// The append-only log shared by the store (appending), the writer thread
/// and the connections (waiting for their records to be written).
#[derive(Debug)]
pub(crate) struct AofLog {
    pub(crate) dir: PathBuf,
    policy: AtomicU8,
    pending: Mutex<Pending>,
    wake: Condvar,
    appended: AtomicU64,
    written: watch::Sender<u64>,
    pub(crate) stats: AofStats,
}

impl AofLog {
    /// A log writing into `dir` with `policy`; `size` is the file's size.
    pub(crate) fn new(dir: PathBuf, policy: AppendFsync, size: u64) -> AofLog {
        let stats = AofStats::default();
        stats.current_size.store(size, Ordering::Relaxed);
        stats.base_size.store(size, Ordering::Relaxed);
        AofLog {
            dir,
            policy: AtomicU8::new(policy as u8),
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
            appended: AtomicU64::new(0),
            written: watch::channel(0).0,
            stats,
        }
    }

    /// The current fsync policy.
    pub(crate) fn policy(&self) -> AppendFsync {
        match self.policy.load(Ordering::Relaxed) {
            0 => AppendFsync::Always,
            1 => AppendFsync::EverySec,
            _ => AppendFsync::No,
        }
    }

    /// Changes the fsync policy (CONFIG SET appendfsync).
    pub(crate) fn set_policy(&self, p: AppendFsync) {
        self.policy.store(p as u8, Ordering::Relaxed);
        self.wake.notify_one();
    }

    /// Path of the log file.
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.join(AOF_FILE)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn append(&self, encode: impl FnOnce(&mut Vec<u8>)) {
        let mut p = self.lock();
        let was_empty = p.buf.is_empty();
        let start = p.buf.len();
        encode(&mut p.buf);
        let n = p.buf.len() - start;
        let Pending { buf, diff, .. } = &mut *p;
        if let Some(d) = diff {
            d.extend_from_slice(&buf[start..]);
        }
        p.appended += n as u64;
        self.appended.store(p.appended, Ordering::Release);
        drop(p);
        if was_empty {
            self.wake.notify_one();
        }
    }

    /// Logs a whole job.
    pub(crate) fn job(&self, job: &Job) {
        self.append(|b| record::encode_job(b, job));
    }

    /// Logs the mutable fields of a job.
    pub(crate) fn state(&self, job: &Job) {
        self.append(|b| record::encode_state(b, &StateFields::of(job)));
    }

    /// Logs a deletion.
    pub(crate) fn del(&self, id: &JobId) {
        self.append(|b| record::encode_del(b, id));
    }

    /// Bytes appended so far (compare with [`wait_written`](Self::wait_written)).
    pub(crate) fn appended(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }

    /// Bytes appended but not written yet.
    pub(crate) fn backlog(&self) -> u64 {
        self.appended().saturating_sub(*self.written.borrow())
    }

    /// Waits until the first `upto` appended bytes are written (and
    /// fsynced with `appendfsync always`).
    pub(crate) async fn wait_written(&self, upto: u64) {
        if *self.written.borrow() >= upto {
            return;
        }
        let mut rx = self.written.subscribe();
        let _ = rx.wait_for(|v| *v >= upto).await;
    }

    /// Marks the first `upto` appended bytes as written.
    pub(crate) fn mark_written(&self, upto: u64) {
        self.written.send_modify(|v| *v = (*v).max(upto));
    }
}

/// Reads the node id kept in `dir`, or stores `fallback` there.
pub(crate) fn node_id(
    dir: &Path,
    configured: Option<&str>,
    fallback: String,
) -> std::io::Result<String> {
    let path = dir.join(NODE_ID_FILE);
    if configured.is_none() {
        if let Ok(s) = std::fs::read_to_string(&path) {
            let s = s.trim();
            if s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Ok(s.to_ascii_lowercase());
            }
        }
    }
    let id = configured.map_or(fallback, str::to_string);
    let tmp = dir.join("node-id.tmp");
    std::fs::write(&tmp, format!("{id}\n"))?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    sync_dir(dir);
    Ok(id)
}

/// fsyncs a directory so a rename in it is durable (best effort).
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}
