//! Background compaction of the log: a snapshot of every job is written to
//! a new file by a thread of its own while commands keep appending (to the
//! old file and to a side buffer); the side buffer is then added to the new
//! file, which replaces the old one atomically (rename).

use super::record::{encode_job, MAGIC};
use super::{sync_dir, AofLog, AOF_FILE};
use crate::job::Job;
use crate::state::Store;
use crate::timers::now_ms;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tracing::{error, info};

/// Name of the file a rewrite writes before it replaces the log.
const TMP_FILE: &str = "appendonly.aof.rewrite";

/// Why a rewrite did not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotStarted {
    /// Persistence is off.
    Disabled,
    /// A rewrite is already running.
    InProgress,
}

/// Starts a rewrite from the current state of `store`.
pub(crate) fn start(store: &mut Store) -> Result<(), NotStarted> {
    let log = store.aof.clone().ok_or(NotStarted::Disabled)?;
    if log.stats.rewrite_in_progress.swap(true, Ordering::AcqRel) {
        return Err(NotStarted::InProgress);
    }
    log.stats.rewrite_scheduled.store(false, Ordering::Relaxed);
    log.stats
        .rewrite_started_ms
        .store(now_ms(), Ordering::Relaxed);
    // Under the store lock: nothing is appended between the snapshot and
    // the start of the side buffer.
    let snapshot: Vec<Job> = store.jobs.values().filter(|j| !j.dummy).cloned().collect();
    log.lock().diff = Some(Vec::new());
    let spawned = std::thread::Builder::new()
        .name("aof-rewrite".into())
        .spawn({
            let log = log.clone();
            move || run(&log, snapshot)
        });
    if let Err(e) = spawned {
        error!(cause = %e, "cannot start the append-only file rewrite");
        finish(&log, false);
    }
    Ok(())
}

fn finish(log: &AofLog, ok: bool) {
    log.lock().diff = None;
    log.stats.last_rewrite_failed.store(!ok, Ordering::Relaxed);
    let started = log.stats.rewrite_started_ms.load(Ordering::Relaxed);
    log.stats
        .last_rewrite_ms
        .store(now_ms().saturating_sub(started), Ordering::Relaxed);
    log.stats
        .rewrite_in_progress
        .store(false, Ordering::Release);
}

fn write_snapshot(path: &Path, mut jobs: Vec<Job>) -> std::io::Result<File> {
    jobs.sort_by_key(|j| (j.ctime, j.id));
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)?;
    let mut buf = Vec::with_capacity(1 << 20);
    buf.extend_from_slice(MAGIC);
    for job in &jobs {
        encode_job(&mut buf, job);
        if buf.len() >= 1 << 20 {
            file.write_all(&buf)?;
            buf.clear();
        }
    }
    file.write_all(&buf)?;
    file.sync_data()?;
    Ok(file)
}

fn run(log: &Arc<AofLog>, snapshot: Vec<Job>) {
    let tmp = log.dir.join(TMP_FILE);
    let mut file = match write_snapshot(&tmp, snapshot) {
        Ok(f) => f,
        Err(e) => {
            error!(cause = %e, path = %tmp.display(), "append-only file rewrite failed");
            let _ = std::fs::remove_file(&tmp);
            finish(log, false);
            return;
        }
    };
    // Swap under the append lock: what was appended meanwhile is all in
    // the side buffer, and from here on appends go to the new file.
    let mut p = log.lock();
    if p.stopped {
        drop(p);
        let _ = std::fs::remove_file(&tmp);
        finish(log, false);
        return;
    }
    let diff = p.diff.take().unwrap_or_default();
    let swapped = file
        .write_all(&diff)
        .and_then(|()| file.sync_data())
        .and_then(|()| std::fs::rename(&tmp, log.dir.join(AOF_FILE)))
        .and_then(|()| file.metadata());
    match swapped {
        Ok(meta) => {
            sync_dir(&log.dir);
            // Everything not written to the old file yet is in the new one.
            p.buf.clear();
            let size = meta.len();
            p.swap = Some((file, size));
            let appended = p.appended;
            drop(p);
            log.wake.notify_one();
            log.mark_written(appended);
            log.stats.base_size.store(size, Ordering::Relaxed);
            log.stats.current_size.store(size, Ordering::Relaxed);
            log.stats.rewrites.fetch_add(1, Ordering::Relaxed);
            finish(log, true);
            info!(bytes = size, "append-only file rewritten");
        }
        Err(e) => {
            drop(p);
            error!(cause = %e, "append-only file rewrite failed");
            let _ = std::fs::remove_file(&tmp);
            finish(log, false);
        }
    }
}
