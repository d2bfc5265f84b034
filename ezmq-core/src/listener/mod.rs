//! The consume-listener runtime.
//!
//! A listener is one fetch loop ([`run_loop`]), one task per job
//! ([`execution`]), one acker that ACKs finished jobs in batches
//! ([`acker`]) and one heartbeat ticker for long-running jobs
//! ([`heartbeat`]):
//!
//! - the loop fetches only as many jobs as there are free concurrency slots
//!   (never fetches with no slot free; on a saturated listener it waits up
//!   to 1 ms for half the slots, to fetch in large batches) and hands each
//!   job its slot;
//! - a job's slot is freed once its ACK is answered, so the broker never
//!   holds more unacknowledged jobs of a listener than its concurrency;
//! - each job runs its handler in a `job` span with heartbeats for long
//!   handlers and panic capture; success ACKs, failure retries with backoff
//!   (without holding a slot) by NACKing, and a job that failed for good goes
//!   to the dead-letter topic ([`DeadLetterRecord`]);
//! - fetch errors (broker down) are logged and retried with backoff; the
//!   loop only ends on a stop;
//! - a stop (from [`ListenerHandle::stop`] or the client's shutdown) ends
//!   fetching, lets running handlers finish within the grace period, then
//!   aborts them and NACKs their jobs. Nothing is ACKed unprocessed.

mod acker;
mod backoff;
mod control;
mod dead_letter;
mod execution;
mod heartbeat;
mod registry;
mod run_loop;

#[cfg(test)]
mod test_backend;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::backend::Backend;
use crate::client::Client;
use crate::consume_options::ConsumeOptions;
use crate::error::Result;
use crate::handler::Handler;
use crate::topic::Topic;

use self::control::Control;

pub use self::dead_letter::DeadLetterRecord;
pub(crate) use self::registry::Registry;

/// A running consume listener, returned by
/// [`MqClient::add_listener`](crate::MqClient::add_listener).
///
/// The listener belongs to the client, not to the handle: dropping the
/// handle does **not** stop it; it runs until [`ListenerHandle::stop`] or
/// the client's [`shutdown`](crate::MqClient::shutdown). Clones control the
/// same listener. (Dropping the last clone of the *client* without a
/// shutdown stops its listeners with no grace: running handlers are aborted
/// and their jobs NACKed.)
#[derive(Clone, Debug)]
pub struct ListenerHandle {
    control: Arc<Control>,
}

impl ListenerHandle {
    /// The topic the listener consumes.
    pub fn topic(&self) -> &Topic {
        self.control.topic()
    }

    /// Handlers running right now.
    pub fn in_flight(&self) -> usize {
        self.control.in_flight()
    }

    /// True until a stop is requested (by [`ListenerHandle::stop`] or the
    /// client's shutdown).
    pub fn is_running(&self) -> bool {
        !self.control.is_stopping()
    }

    /// True once the listener has stopped and every one of its jobs has been
    /// ACKed or given back.
    pub fn is_finished(&self) -> bool {
        self.control.is_done()
    }

    /// Stops the listener and waits until it has drained.
    ///
    /// No new fetch starts; jobs returned by a fetch already in flight are
    /// given back without running. Running handlers get `grace` to finish
    /// (and are ACKed or retried as usual); handlers still running after
    /// `grace` are aborted and their jobs NACKed so another consumer gets
    /// them at once. Jobs waiting for a retry backoff are NACKed at once.
    ///
    /// Calling it again, or after the client shut down, just waits for the
    /// drain; the first grace given wins.
    pub async fn stop(&self, grace: Duration) {
        self.control.request_stop(grace);
        self.control.finished().await;
    }
}

/// What a listener's tasks share.
pub(crate) struct Ctx<B: Backend> {
    backend: Arc<B>,
    topic: Topic,
    handler: Arc<dyn Handler>,
    options: ConsumeOptions,
    /// `None` for [`DeadLetter::Drop`](crate::DeadLetter::Drop).
    dead_letter: Option<Topic>,
    control: Arc<Control>,
    /// One permit per concurrency slot.
    slots: Arc<Semaphore>,
    /// The job tasks (handlers and retry timers).
    jobs: TaskTracker,
    /// Sends finished jobs' ACKs in batches.
    acker: acker::Acker,
    /// Sends the heartbeats of long-running jobs.
    heartbeats: Arc<heartbeat::Heartbeats>,
}

/// Starts a listener on `topic` owned by `client` (options already
/// validated). Must be called within a Tokio runtime.
pub(crate) fn start<B: Backend>(
    client: &Client<B>,
    registry: &Registry,
    topic: Topic,
    handler: Arc<dyn Handler>,
    options: ConsumeOptions,
) -> Result<ListenerHandle> {
    let dead_letter = dead_letter::resolve_topic(&topic, &options.dead_letter)?;
    let control = Arc::new(Control::new(
        topic.clone(),
        client.shutdown_token(),
        options.fetch_wait,
    ));
    let (acker, ack_queue) = acker::channel();
    let heartbeats = Arc::new(heartbeat::Heartbeats::new(options.heartbeat_after));
    let ctx = Arc::new(Ctx {
        backend: Arc::clone(client.backend()),
        topic: topic.clone(),
        handler,
        slots: Arc::new(Semaphore::new(options.concurrency)),
        options,
        dead_letter,
        control: Arc::clone(&control),
        jobs: TaskTracker::new(),
        acker,
        heartbeats,
    });
    registry.register(Arc::clone(&control));
    let span = tracing::info_span!("listener", topic = %topic);
    client.spawn(run_loop::run(ctx, ack_queue).instrument(span));
    tracing::debug!(topic = %topic, "listener started");
    Ok(ListenerHandle { control })
}
