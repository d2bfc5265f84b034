//! Clock helpers and the background task that runs job timers (delay,
//! retry requeue, TTL expiry) and reclaims idle queues.

use crate::state::Node;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

/// Timer resolution: job events fire at most this late.
pub(crate) const TICK: Duration = Duration::from_millis(10);

/// Unix time in milliseconds.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Unix time in seconds.
pub(crate) fn now_s() -> u64 {
    now_ms() / 1000
}

/// Runs until `token` is cancelled.
pub(crate) async fn run(node: Arc<Node>, token: CancellationToken) {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_gc = 0u64;
    loop {
        tokio::select! {
            _ = token.cancelled() => return,
            _ = interval.tick() => {}
        }
        let now = now_ms();
        let mut store = node.store();
        store.process_timers(now);
        let rewrite_due = node.aof.as_ref().is_some_and(|a| {
            a.stats
                .rewrite_scheduled
                .load(std::sync::atomic::Ordering::Relaxed)
        });
        if rewrite_due {
            let _ = crate::persist::rewrite::start(&mut store);
        }
        if now / 1000 != last_gc {
            last_gc = now / 1000;
            store.gc_queues(last_gc);
        }
    }
}
