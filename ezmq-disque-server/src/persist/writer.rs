//! The writer thread: takes what commands appended, writes it to the log
//! file and fsyncs it as the policy says, then lets the waiting
//! connections reply. Many connections' records go out in one write and
//! one fsync (group commit).

use super::{AofLog, AppendFsync, AUTO_REWRITE_MIN_BYTES};
use std::fs::File;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

/// Longest idle wait before the writer looks at the shutdown token.
const IDLE_WAIT: Duration = Duration::from_millis(100);
/// `everysec`: fsync period.
const FSYNC_EVERY: Duration = Duration::from_secs(1);
/// Pause before retrying a failed write.
const RETRY_WRITE: Duration = Duration::from_millis(500);

/// Runs until `token` is cancelled and everything appended is written.
pub(crate) fn run(log: Arc<AofLog>, mut file: File, token: CancellationToken) {
    let mut batch: Vec<u8> = Vec::new();
    let mut last_fsync = Instant::now();
    let mut dirty = false;
    loop {
        let end = {
            let mut p = log.lock();
            loop {
                if !p.buf.is_empty() || p.swap.is_some() {
                    break;
                }
                let fsync_due = dirty
                    && log.policy() == AppendFsync::EverySec
                    && last_fsync.elapsed() >= FSYNC_EVERY;
                if fsync_due {
                    break;
                }
                if token.is_cancelled() {
                    p.stopped = true;
                    drop(p);
                    if dirty && log.policy() != AppendFsync::No {
                        let _ = file.sync_data();
                    }
                    return;
                }
                p = log
                    .wake
                    .wait_timeout(p, IDLE_WAIT)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            if let Some((f, size)) = p.swap.take() {
                file = f;
                dirty = false;
                log.stats.current_size.store(size, Ordering::Relaxed);
            }
            std::mem::swap(&mut p.buf, &mut batch);
            p.appended
        };
        if !batch.is_empty() {
            while let Err(e) = file.write_all(&batch) {
                log.stats.last_write_failed.store(true, Ordering::Relaxed);
                error!(cause = %e, path = %log.path().display(), "cannot write the append-only file");
                if token.is_cancelled() {
                    return;
                }
                std::thread::sleep(RETRY_WRITE);
            }
            log.stats.last_write_failed.store(false, Ordering::Relaxed);
            log.stats
                .current_size
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            dirty = true;
            batch.clear();
            if batch.capacity() > (4 << 20) {
                batch = Vec::new();
            }
        }
        let fsync = match log.policy() {
            AppendFsync::Always => dirty,
            AppendFsync::EverySec => dirty && last_fsync.elapsed() >= FSYNC_EVERY,
            AppendFsync::No => false,
        };
        if fsync {
            if let Err(e) = file.sync_data() {
                warn!(cause = %e, "fsync of the append-only file failed");
            }
            dirty = false;
            last_fsync = Instant::now();
        }
        log.mark_written(end);
        let size = log.stats.current_size.load(Ordering::Relaxed);
        let base = log.stats.base_size.load(Ordering::Relaxed);
        if size >= AUTO_REWRITE_MIN_BYTES.max(base.saturating_mul(2))
            && !log.stats.rewrite_in_progress.load(Ordering::Relaxed)
        {
            log.stats.rewrite_scheduled.store(true, Ordering::Relaxed);
        }
    }
}
