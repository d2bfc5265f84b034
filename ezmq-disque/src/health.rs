//! This client's view of one node's health: up, or down (refused, reset,
//! or hung) until a probe sees it answer again.
//!
//! Marking a node down cancels a signal that every command still waiting
//! on it selects on, so they all fail over at once instead of each waiting
//! for its own timeout.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;

/// Health of one node.
#[derive(Debug, Default)]
pub(crate) struct Health {
    down: AtomicBool,
    /// How many times the node was marked down: a command that saw another
    /// value at its start knows the node went down under it.
    downs: AtomicU64,
    /// Cancelled when the node is marked down, then replaced.
    signal: Mutex<CancellationToken>,
    /// True while one caller PINGs the node to tell hung from slow.
    probing: AtomicBool,
}

impl Health {
    fn lock_signal(&self) -> MutexGuard<'_, CancellationToken> {
        self.signal.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// True while the node is down.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// The number of times the node was marked down so far.
    pub(crate) fn downs(&self) -> u64 {
        self.downs.load(Ordering::Acquire)
    }

    /// The signal the next mark-down cancels.
    pub(crate) fn signal(&self) -> CancellationToken {
        self.lock_signal().clone()
    }

    /// Marks the node down and wakes every command waiting on it. True when
    /// it was up.
    pub(crate) fn mark_down(&self) -> bool {
        let mut signal = self.lock_signal();
        let was_up = !self.down.swap(true, Ordering::AcqRel);
        self.downs.fetch_add(1, Ordering::AcqRel);
        signal.cancel();
        *signal = CancellationToken::new();
        was_up
    }

    /// Marks the node up. True when it was down.
    pub(crate) fn mark_up(&self) -> bool {
        self.down.swap(false, Ordering::AcqRel)
    }

    /// The right to probe the node, unless another caller probes it now.
    pub(crate) fn start_probe(&self) -> Option<Probing<'_>> {
        (!self.probing.swap(true, Ordering::AcqRel)).then_some(Probing(&self.probing))
    }
}

/// Held while probing; lets the next caller probe once dropped.
#[derive(Debug)]
pub(crate) struct Probing<'a>(&'a AtomicBool);

impl Drop for Probing<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marking_down_wakes_waiters_once_per_fall() {
        let health = Health::default();
        let before = health.signal();
        assert!(!health.is_down());
        assert!(health.mark_down());
        assert!(before.is_cancelled());
        assert!(health.is_down());
        assert_eq!(health.downs(), 1);
        // The next signal is fresh; a second mark-down fires it too.
        let next = health.signal();
        assert!(!next.is_cancelled());
        assert!(!health.mark_down());
        assert!(next.is_cancelled());
        assert!(health.mark_up());
        assert!(!health.is_down());
        assert!(!health.mark_up());
    }

    #[test]
    fn one_probe_at_a_time() {
        let health = Health::default();
        let first = health.start_probe();
        assert!(first.is_some());
        assert!(health.start_probe().is_none());
        drop(first);
        assert!(health.start_probe().is_some());
    }
}
