//! Heartbeats: extending the leases of long-running jobs, on brokers that
//! have leases (Disque `WORKING`, Redis `XCLAIM`).
//!
//! One ticker task per listener rather than a timer per job (a `sleep` armed
//! and cancelled for every job cost about 0.9 µs of CPU per job, and almost
//! every job finishes long before its first heartbeat). A job registers
//! while its handler runs and is
//! unregistered when its [`Beating`] guard drops.
//!
//! Per job: the first [`Settle::extend_lease`](crate::spi::Settle::extend_lease)
//! after `after`, then every half lease the broker reports (at least
//! 200 ms). A zero window (an at-most-once job, never redelivered) stops the
//! job's heartbeats; an error is logged and retried after `after`.
//!
//! The ticker sleeps until the earliest heartbeat due, or until a job
//! registers with an earlier one; with no job registered it just waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::job::{Job, JobId};
use crate::spi::DeliveryHandle;
use crate::topic::Topic;

/// Shortest pause between two heartbeats of one job.
const MIN_INTERVAL: Duration = Duration::from_millis(200);

/// The jobs of one listener that may need heartbeats.
#[derive(Debug)]
pub(crate) struct Heartbeats {
    table: Mutex<Table>,
    /// Wakes the ticker when a job registers with a heartbeat due before
    /// the ticker's planned wake-up.
    wake: Notify,
    after: Duration,
}

#[derive(Debug, Default)]
struct Table {
    next_key: u64,
    jobs: HashMap<u64, Entry>,
    /// When the ticker will next look; `None` while it waits for a job.
    planned: Option<Instant>,
}

#[derive(Debug)]
struct Entry {
    id: JobId,
    topic: Topic,
    attempt: u32,
    handle: DeliveryHandle,
    /// Next heartbeat; `None` once the broker said the job is never
    /// redelivered.
    due: Option<Instant>,
}

/// A job whose heartbeat is due, taken out of the table to send it.
struct Due {
    key: u64,
    id: JobId,
    topic: Topic,
    attempt: u32,
    handle: DeliveryHandle,
    at: Instant,
}

/// Keeps a job registered for heartbeats until dropped.
#[derive(Debug)]
pub(crate) struct Beating<'a> {
    heartbeats: &'a Heartbeats,
    key: u64,
}

impl Drop for Beating<'_> {
    fn drop(&mut self) {
        self.heartbeats.lock().jobs.remove(&self.key);
    }
}

impl Heartbeats {
    /// Heartbeats starting `after` a job registers.
    pub(crate) fn new(after: Duration) -> Self {
        Heartbeats {
            table: Mutex::new(Table::default()),
            wake: Notify::new(),
            after,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends heartbeats for `job` until the guard is dropped.
    pub(crate) fn register(&self, job: &Job, handle: DeliveryHandle) -> Beating<'_> {
        let due = Instant::now() + self.after;
        let mut table = self.lock();
        let key = table.next_key;
        table.next_key += 1;
        table.jobs.insert(
            key,
            Entry {
                id: job.id().clone(),
                topic: job.topic().clone(),
                attempt: job.attempt(),
                handle,
                due: Some(due),
            },
        );
        if table.planned.is_none_or(|planned| due < planned) {
            // Only when the ticker would look too late: on a busy listener
            // the oldest running job is due first, so this stays rare.
            table.planned = Some(due);
            drop(table);
            self.wake.notify_one();
        }
        Beating {
            heartbeats: self,
            key,
        }
    }

    /// The ticker: sends the heartbeats that are due until `finish` is
    /// cancelled (once every job task of the listener has ended).
    pub(crate) async fn run(self: Arc<Self>, finish: CancellationToken) {
        loop {
            let planned = self.plan();
            let sleep = async {
                match planned {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = finish.cancelled() => return,
                () = self.wake.notified() => continue,
                () = sleep => {}
            }
            self.beat_due().await;
        }
    }

    /// Sets and returns the next wake-up: the earliest heartbeat due.
    fn plan(&self) -> Option<Instant> {
        let mut table = self.lock();
        let earliest = table.jobs.values().filter_map(|e| e.due).min();
        table.planned = earliest;
        earliest
    }

    /// Extends the lease of every job due now, concurrently, and schedules
    /// each job's next heartbeat.
    async fn beat_due(&self) {
        let now = Instant::now();
        let due: Vec<Due> = self
            .lock()
            .jobs
            .iter()
            .filter_map(|(key, e)| {
                let at = e.due.filter(|at| *at <= now)?;
                Some(Due {
                    key: *key,
                    id: e.id.clone(),
                    topic: e.topic.clone(),
                    attempt: e.attempt,
                    handle: e.handle.clone(),
                    at,
                })
            })
            .collect();
        if due.is_empty() {
            return;
        }
        let beats = due.iter().map(|d| d.handle.extend_lease());
        let results = futures::future::join_all(beats).await;
        let now = Instant::now();
        let mut table = self.lock();
        for (
            Due {
                key,
                id,
                topic,
                attempt,
                at,
                ..
            },
            result,
        ) in due.into_iter().zip(results)
        {
            let next = match result {
                Ok(window) if window.is_zero() => {
                    tracing::debug!(message_id = %id, "job is never redelivered; heartbeats stop");
                    None
                }
                Ok(window) => {
                    tracing::trace!(message_id = %id, ?window, "heartbeat sent");
                    // From the planned time, so late ticks do not drift.
                    let pause = (window / 2).max(MIN_INTERVAL);
                    let next = at + pause;
                    Some(if next > now { next } else { now + pause })
                }
                Err(err) => {
                    tracing::warn!(
                        topic = %topic,
                        message_id = %id,
                        attempt,
                        cause = %err,
                        "heartbeat failed; the job may be redelivered"
                    );
                    Some(now + self.after.max(MIN_INTERVAL))
                }
            };
            // The job may have finished meanwhile.
            if let Some(entry) = table.jobs.get_mut(&key) {
                entry.due = next;
            }
        }
    }
}
