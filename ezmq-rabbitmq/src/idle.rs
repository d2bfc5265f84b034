//! Consumers nobody fetches from any more give their prefetch back.
//!
//! A listener that stopped does not tell the backend, and its consumer
//! would keep receiving (and holding) up to its prefetch of jobs that no
//! one takes. So each consumer has a watcher: once the consumer has gone
//! [`IDLE`] without a receive, with none of its deliveries still being
//! handled, its channel is closed, which gives back everything it holds;
//! the next receive opens a new one. A live listener is inside a receive
//! (or a moment from the next) whenever it has nothing to run, and a busy
//! one has deliveries outstanding, so neither is touched. A consumer
//! cancelled by a pause while jobs of it ran is closed the same way once
//! they are done, which also gives back any delivery the broker sent it
//! after the cancel.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Weak;
use std::time::Duration;

use crate::consumer::ConsumerState;

/// How long a consumer with nothing outstanding may go without a receive.
pub(crate) const IDLE: Duration = Duration::from_secs(1);

/// A new consumer id (for the watcher to tell its consumer from a later
/// one in the same slot).
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Watches consumer `id` in `slot` until it is gone, replaced or closed
/// here. One small task per consumer, ended with it.
pub(crate) fn watch(slot: Weak<tokio::sync::Mutex<Option<ConsumerState>>>, id: u64) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(IDLE / 2).await;
            let Some(slot) = slot.upgrade() else {
                return;
            };
            // Locked: a receive (or a pause) is under way.
            let Ok(mut guard) = slot.try_lock() else {
                continue;
            };
            let Some(state) = guard.as_ref() else {
                return;
            };
            if !state.is_watched_by(id) {
                return;
            }
            if !state.is_idle(IDLE) {
                continue;
            }
            if let Some(state) = guard.take() {
                tracing::debug!(queue = %state.queue(), "no receive for a while: consumer channel closed, its prefetch given back");
                state.close().await;
            }
            return;
        }
    });
}
