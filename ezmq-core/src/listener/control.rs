//! The state a listener shares with its handle, its tasks and the client's
//! registry: the stop signal, the grace deadline, the in-flight count.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::presence::Presence;
use crate::spi::Source;

/// Used instead of an `Instant` overflow for absurdly long graces.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Shared control block of one listener.
#[derive(Debug)]
pub(crate) struct Control {
    source: Source,
    /// The listener's concurrency limit.
    concurrency: usize,
    /// When the listener started.
    started_at: SystemTime,
    /// The client's presence, told when the listener stops.
    presence: Arc<Presence>,
    /// Cancelled when the listener must stop fetching (a child of the
    /// client's shutdown token).
    stop: CancellationToken,
    /// When in-flight handlers are aborted; set by the first stopper.
    deadline: Mutex<Option<Instant>>,
    /// Cancelled once the listener has drained and its tasks are gone.
    done: CancellationToken,
    /// Handlers running right now.
    in_flight: AtomicUsize,
    /// Jobs whose handler succeeded, since the listener started.
    succeeded: AtomicU64,
    /// Handler runs that failed (retried or dead-lettered), since the
    /// listener started.
    failed: AtomicU64,
    /// Paused here ([`Control::set_paused`]) and cluster-wide
    /// ([`Control::set_topic_paused`]).
    paused: tokio::sync::watch::Sender<Paused>,
}

/// Why a listener does not fetch: its handle paused it, or its topic is
/// paused cluster-wide.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Paused {
    here: bool,
    topic: bool,
}

impl Paused {
    fn any(self) -> bool {
        self.here || self.topic
    }
}

impl Control {
    pub(crate) fn new(
        source: Source,
        concurrency: usize,
        presence: Arc<Presence>,
        stop: CancellationToken,
    ) -> Self {
        Control {
            source,
            concurrency,
            started_at: SystemTime::now(),
            presence,
            stop,
            deadline: Mutex::new(None),
            done: CancellationToken::new(),
            in_flight: AtomicUsize::new(0),
            succeeded: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            paused: tokio::sync::watch::Sender::new(Paused::default()),
        }
    }

    pub(crate) fn source(&self) -> &Source {
        &self.source
    }

    pub(crate) fn concurrency(&self) -> usize {
        self.concurrency
    }

    pub(crate) fn started_at(&self) -> SystemTime {
        self.started_at
    }

    fn lock_deadline(&self) -> MutexGuard<'_, Option<Instant>> {
        self.deadline.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops fetching; handlers still running `grace` from now are aborted.
    /// The first call's grace wins.
    pub(crate) fn request_stop(&self, grace: Duration) {
        {
            let mut deadline = self.lock_deadline();
            if deadline.is_none() {
                let now = Instant::now();
                let at = now.checked_add(grace).unwrap_or_else(|| now + FAR_FUTURE);
                *deadline = Some(at);
            }
        }
        self.stop.cancel();
        self.presence.changed();
    }

    /// True once a stop has been requested (by the handle or the client).
    pub(crate) fn is_stopping(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Completes when a stop has been requested.
    pub(crate) async fn stopping(&self) {
        self.stop.cancelled().await;
    }

    /// Completes when in-flight handlers must be aborted: at the grace
    /// deadline after a stop. A stop that came without a grace (the last
    /// client clone was dropped) aborts at once.
    pub(crate) async fn abort_signal(&self) {
        self.stop.cancelled().await;
        let deadline = *self.lock_deadline().get_or_insert_with(Instant::now);
        tokio::time::sleep_until(deadline).await;
    }

    /// True once the listener has drained.
    pub(crate) fn is_done(&self) -> bool {
        self.done.is_cancelled()
    }

    /// Completes once the listener has drained.
    pub(crate) async fn finished(&self) {
        self.done.cancelled().await;
    }

    /// Marks the listener drained when dropped (even if its task is torn
    /// down with the runtime).
    pub(crate) fn done_guard(&self) -> DropGuard {
        self.done.clone().drop_guard()
    }

    /// Pauses (`true`) or resumes the fetch loop, from the listener's
    /// handle.
    pub(crate) fn set_paused(&self, paused: bool) {
        self.paused.send_modify(|p| p.here = paused);
    }

    /// Records whether the topic is paused cluster-wide.
    pub(crate) fn set_topic_paused(&self, paused: bool) {
        self.paused.send_if_modified(|p| {
            let changed = p.topic != paused;
            p.topic = paused;
            changed
        });
    }

    /// True while paused, here or cluster-wide.
    pub(crate) fn is_paused(&self) -> bool {
        self.paused.borrow().any()
    }

    /// True while the topic is paused cluster-wide.
    pub(crate) fn is_topic_paused(&self) -> bool {
        self.paused.borrow().topic
    }

    /// Completes once the listener is paused neither here nor
    /// cluster-wide.
    pub(crate) async fn resumed(&self) {
        let mut paused = self.paused.subscribe();
        // The sender lives as long as `self`: `wait_for` cannot fail here.
        let _ = paused.wait_for(|paused| !paused.any()).await;
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Counts a handler run that ended: `true` when it succeeded.
    pub(crate) fn count_outcome(&self, succeeded: bool) {
        let counter = if succeeded {
            &self.succeeded
        } else {
            &self.failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Jobs whose handler succeeded since the listener started.
    pub(crate) fn succeeded(&self) -> u64 {
        self.succeeded.load(Ordering::Relaxed)
    }

    /// Handler runs that failed since the listener started.
    pub(crate) fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Counts a running handler until the guard is dropped.
    pub(crate) fn track_in_flight(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(&self.in_flight)
    }
}

/// Decrements the in-flight count on drop.
#[derive(Debug)]
pub(crate) struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
