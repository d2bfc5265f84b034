//! The acker: one task per listener that acknowledges finished jobs in
//! batches.
//!
//! A job that succeeded hands its delivery handle, with its concurrency slot, to the
//! acker instead of sending its own ACK from its own task (a task, a future
//! and a command per job cost about 2 µs of CPU per job). The acker takes
//! whatever handles are ready at that moment — it never waits to fill a batch,
//! so an ACK leaves at once, or as soon as the previous batch is answered —
//! and acknowledges them with one [`Backend::ack_batch`] (Disque:
//! `ACKJOB id1 id2 ...`).
//!
//! The slots are freed as the batch's ACK is sent, not when it is answered:
//! the next fetch overlaps the ACK's round trip instead of following it
//! (on one Disque node that was the listener's largest wait). The broker
//! thus holds at most twice the concurrency of a listener's jobs
//! unacknowledged, for one round trip: the batch being acknowledged and the
//! next fetch. Handlers never run more than the concurrency at once.
//!
//! While the fetch loop runs a fetched batch's first polls it holds the
//! acker ([`Acker::hold`]): the jobs that finish there are ACKed together
//! once the batch is through, in one command instead of a first one with
//! the first job and a second with the rest.
//!
//! A failed batch is retried one by one; a job whose ACK fails again is
//! logged and left to redelivery when its lease ends (at-least-once: nothing is
//! ever ACKed that did not succeed).
//!
//! Once a unique job is acknowledged, the acker gives its key back
//! ([`unique`]); jobs without a key cost one header lookup.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

use crate::job::{Job, JobId};
use crate::spi::{Backend, DeliveryHandle};
use crate::topic::Topic;
use crate::unique;

/// Most ids in one `ack_many` call. Bounds the command size; a listener
/// rarely has more than its concurrency waiting.
const MAX_BATCH: usize = 256;

/// A processed job waiting for its ACK, with the slot it still holds (and
/// its id and attempt, for the log should the ACK fail).
#[derive(Debug)]
struct Pending {
    handle: DeliveryHandle,
    slot: OwnedSemaphorePermit,
    id: JobId,
    attempt: u32,
    /// The unique key claim to give back once acknowledged.
    unique: Option<Topic>,
}

/// Hands processed jobs to the listener's acker task.
#[derive(Debug)]
pub(crate) struct Acker {
    tx: mpsc::UnboundedSender<Pending>,
    holds: Arc<Holds>,
    /// For the fallback ACK and its unique key.
    backend: Arc<dyn Backend>,
}

/// The receiving end, consumed by [`run`].
#[derive(Debug)]
pub(crate) struct AckQueue {
    rx: mpsc::UnboundedReceiver<Pending>,
    holds: Arc<Holds>,
    /// The listener's topic, for log events.
    topic: Topic,
}

/// How many [`Hold`]s are out, and the signal that the last one ended.
#[derive(Debug, Default)]
struct Holds {
    count: AtomicUsize,
    released: Notify,
}

/// Keeps the acker from sending until dropped (see [`Acker::hold`]).
#[derive(Debug)]
pub(crate) struct Hold {
    holds: Arc<Holds>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.holds.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            // A permit is stored if the acker is not waiting yet.
            self.holds.released.notify_one();
        }
    }
}

/// A connected [`Acker`] and [`AckQueue`] for a listener on `topic`.
pub(crate) fn channel(topic: Topic, backend: Arc<dyn Backend>) -> (Acker, AckQueue) {
    let (tx, rx) = mpsc::unbounded_channel();
    let holds = Arc::new(Holds::default());
    (
        Acker {
            tx,
            holds: Arc::clone(&holds),
            backend,
        },
        AckQueue { rx, holds, topic },
    )
}

impl Acker {
    /// Holds the ACKs of jobs that finish until the returned guard is
    /// dropped, so they go out together. The holder must not wait for an
    /// ACK while it holds (nothing would send it).
    pub(crate) fn hold(&self) -> Hold {
        self.holds.count.fetch_add(1, Ordering::AcqRel);
        Hold {
            holds: Arc::clone(&self.holds),
        }
    }

    /// Queues `job`'s delivery for acknowledgement; `slot` is freed as its
    /// ACK is sent. Falls back to a direct [`DeliveryHandle::ack`] when the
    /// acker is gone (it only stops after every job task has ended, so this
    /// is a safety net).
    pub(crate) async fn ack(&self, job: &Job, handle: DeliveryHandle, slot: OwnedSemaphorePermit) {
        let pending = Pending {
            handle,
            slot,
            id: job.id().clone(),
            attempt: job.attempt(),
            unique: unique::settled_key(job),
        };
        if let Err(mpsc::error::SendError(pending)) = self.tx.send(pending) {
            if ack_one(job.topic(), &pending.handle, &pending.id, pending.attempt).await {
                if let Some(key) = &pending.unique {
                    unique::release(&*self.backend, key, &pending.id).await;
                }
            }
        }
    }
}

/// Runs the acker until `finish` is cancelled, then flushes every id queued
/// before that. The listener cancels `finish` only once all its job tasks
/// have ended, so the flush covers every ACK the listener will ever send.
pub(crate) async fn run(backend: Arc<dyn Backend>, queue: AckQueue, finish: CancellationToken) {
    let AckQueue {
        mut rx,
        holds,
        topic,
    } = queue;
    let mut batch = Batch::new(topic);
    loop {
        let first = tokio::select! {
            // Ids first: a finish never overtakes an ACK already queued.
            biased;
            pending = rx.recv() => match pending {
                Some(pending) => pending,
                None => break,
            },
            () = finish.cancelled() => break,
        };
        batch.push(first);
        while holds.count.load(Ordering::Acquire) > 0 {
            holds.released.notified().await;
        }
        // Whatever else is ready now; never wait for more.
        while batch.handles.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(pending) => batch.push(pending),
                Err(_) => break,
            }
        }
        batch.send(&*backend).await;
    }
    rx.close();
    while let Some(pending) = rx.recv().await {
        batch.push(pending);
        if batch.handles.len() >= MAX_BATCH {
            batch.send(&*backend).await;
        }
    }
    batch.send(&*backend).await;
}

/// Ids being acknowledged together, and the slots they free. Reused from
/// batch to batch.
#[derive(Debug)]
struct Batch {
    topic: Topic,
    handles: Vec<DeliveryHandle>,
    slots: Vec<OwnedSemaphorePermit>,
    /// Each handle's job id and attempt.
    jobs: Vec<(JobId, u32)>,
    /// Unique keys to give back once their job is acknowledged: the
    /// handle's index and the key's claim.
    unique: Vec<(usize, Topic)>,
}

impl Batch {
    fn new(topic: Topic) -> Self {
        Batch {
            topic,
            handles: Vec::new(),
            slots: Vec::new(),
            jobs: Vec::new(),
            unique: Vec::new(),
        }
    }

    fn push(&mut self, pending: Pending) {
        if let Some(key) = pending.unique {
            self.unique.push((self.handles.len(), key));
        }
        self.handles.push(pending.handle);
        self.slots.push(pending.slot);
        self.jobs.push((pending.id, pending.attempt));
    }

    /// Frees the batch's slots and ACKs it (retrying id by id if that
    /// fails).
    async fn send(&mut self, backend: &dyn Backend) {
        if self.handles.is_empty() {
            return;
        }
        self.slots.clear();
        let mut acked = vec![
            true;
            if self.unique.is_empty() {
                0
            } else {
                self.handles.len()
            }
        ];
        if let Err(err) = backend.ack_batch(&self.handles).await {
            tracing::warn!(
                topic = %self.topic,
                cause = %err,
                jobs = self.handles.len(),
                "batch ACK failed; acknowledging the jobs one by one"
            );
            for (i, (handle, (id, attempt))) in self.handles.iter().zip(&self.jobs).enumerate() {
                let ok = ack_one(&self.topic, handle, id, *attempt).await;
                if let Some(acked) = acked.get_mut(i) {
                    *acked = ok;
                }
            }
        }
        for (i, key) in self.unique.drain(..) {
            if acked.get(i).copied().unwrap_or(false) {
                unique::release(backend, &key, &self.jobs[i].0).await;
            }
        }
        self.handles.clear();
        self.jobs.clear();
    }
}

/// ACKs one job; true when it was. A failure is a warning: the job is not
/// lost, the broker redelivers it (and the next attempt runs it again).
async fn ack_one(topic: &Topic, handle: &DeliveryHandle, id: &JobId, attempt: u32) -> bool {
    let acked = handle.ack().await;
    if let Err(err) = &acked {
        tracing::warn!(
            topic = %topic,
            message_id = %id,
            attempt,
            cause = %err,
            "ACK failed; the broker redelivers the job when its lease ends"
        );
    }
    acked.is_ok()
}
