//! The consume-listener runtime.
//!
//! A listener is one fetch loop ([`run_loop`]), its jobs ([`execution`]:
//! each starts in the loop and gets a task of its own only if its handler
//! awaits something), one acker that ACKs finished jobs in batches
//! ([`acker`]), one heartbeat ticker for long-running jobs
//! ([`heartbeat`]) and one queue-depth sampler ([`depth`]):
//!
//! - the loop fetches only as many jobs as there are free concurrency slots
//!   (never fetches with no slot free; on a saturated listener it waits up
//!   to 1 ms for half the slots, to fetch in large batches) and hands each
//!   job its slot;
//! - a job's slot is freed as its ACK is sent, so the next fetch overlaps
//!   the ACK's round trip (the broker holds at most twice the concurrency
//!   of a listener's jobs unacknowledged, for that round trip);
//! - each job runs its handler in a `process` span with lease extensions for
//!   long handlers (where the broker has leases) and panic capture; success
//!   ACKs, failure hands the job back through its delivery handle to come
//!   again after the backoff (the slot is held until the broker took it
//!   back, so a failing downstream never makes a listener hoard jobs), and a
//!   job that failed for good goes to the dead-letter topic
//!   ([`DeadLetterRecord`]);
//! - fetch errors (broker down) are logged and retried with backoff; the
//!   loop only ends on a stop;
//! - a stop (from [`ListenerHandle::stop`] or the client's shutdown) ends
//!   fetching, lets running handlers finish within the grace period, then
//!   aborts them and gives their jobs back. Nothing is ACKed unprocessed
//!   (unless the listener is [at most once](crate::ConsumeOptions::at_most_once)).

mod acker;
mod admission;
mod backoff;
mod control;
mod dead_letter;
mod decision;
mod depth;
mod execution;
mod flow_record;
mod heartbeat;
mod key_gate;
mod lanes;
mod rate_gate;
mod registry;
mod run_loop;
mod slot_gate;
pub(crate) mod topic_pause;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::consume_options::ConsumeOptions;
use crate::error::Result;
use crate::handler::Handler;
use crate::spi::{Backend, Capability, Runtime, Source};
use crate::topic::Topic;

use self::control::Control;

pub use self::dead_letter::DeadLetterRecord;
pub(crate) use self::flow_record::status as flow_status;
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
    pub(crate) fn from_control(control: Arc<Control>) -> Self {
        ListenerHandle { control }
    }

    /// The topic the listener consumes (the broadcast topic for a consumer
    /// group).
    pub fn topic(&self) -> &Topic {
        self.control.source().topic()
    }

    /// What the listener consumes: a topic, or a consumer group of one.
    pub fn source(&self) -> &Source {
        self.control.source()
    }

    /// The most handlers it runs at once
    /// ([`ConsumeOptions::concurrency`](crate::ConsumeOptions::concurrency)).
    pub fn concurrency(&self) -> usize {
        self.control.concurrency()
    }

    /// When the listener started.
    pub fn started_at(&self) -> std::time::SystemTime {
        self.control.started_at()
    }

    /// Handlers running right now.
    pub fn in_flight(&self) -> usize {
        self.control.in_flight()
    }

    /// Jobs whose handler succeeded since the listener started.
    pub fn succeeded(&self) -> u64 {
        self.control.succeeded()
    }

    /// Handler runs that failed since the listener started: those retried
    /// and those dead-lettered.
    pub fn failed(&self) -> u64 {
        self.control.failed()
    }

    /// True until a stop is requested (by [`ListenerHandle::stop`] or the
    /// client's shutdown).
    pub fn is_running(&self) -> bool {
        !self.control.is_stopping()
    }

    /// Pauses the listener: it fetches no more jobs until
    /// [`ListenerHandle::resume`]. Running jobs finish as usual (and a fetch
    /// already in flight runs what it returns); jobs the backend holds
    /// prefetched for it are given back to the broker at once, so other
    /// listeners get them. A paused listener still stops and drains as
    /// usual. Pausing a paused listener does nothing.
    pub fn pause(&self) {
        self.control.set_paused(true);
    }

    /// Resumes a listener paused by [`ListenerHandle::pause`]: it fetches
    /// again at once (unless its topic is paused cluster-wide).
    pub fn resume(&self) {
        self.control.set_paused(false);
    }

    /// True while the listener is paused: by [`ListenerHandle::pause`], or
    /// because its topic is paused cluster-wide
    /// ([`Admin::pause`](crate::Admin::pause)).
    pub fn is_paused(&self) -> bool {
        self.control.is_paused()
    }

    /// True while the listener's topic is paused cluster-wide
    /// ([`Admin::pause`](crate::Admin::pause)), as this listener last
    /// saw it (it looks every half second).
    pub fn is_topic_paused(&self) -> bool {
        self.control.is_topic_paused()
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
pub(crate) struct Ctx {
    backend: Arc<dyn Backend>,
    source: Source,
    handler: Arc<dyn Handler>,
    options: ConsumeOptions,
    /// `None` for [`DeadLetter::Drop`](crate::DeadLetter::Drop).
    dead_letter: Option<Topic>,
    control: Arc<Control>,
    /// One permit per concurrency slot.
    slots: Arc<Semaphore>,
    /// The job tasks (handlers and retry timers).
    jobs: TaskTracker,
    /// True while jobs get their first poll in the fetch loop (see
    /// `run_loop::dispatch`).
    inline_first_poll: AtomicBool,
    /// Set when the admission step waited for a rate-limit token or a
    /// global slot; published and cleared by [`flow_record`].
    held_back: AtomicBool,
    /// Sends finished jobs' ACKs in batches.
    acker: acker::Acker,
    /// Extends the leases of long-running jobs; `None` on brokers without
    /// leases.
    heartbeats: Option<Arc<heartbeat::Heartbeats>>,
    /// The topic's priority lanes; `None` where there are none to read.
    lanes: Option<lanes::LaneWatch>,
    /// Metric handles.
    telemetry: crate::telemetry::ListenerTelemetry,
    /// The client's send handles: a dead letter is pushed as any message
    /// is (a `send` span in the failed job's trace, the sent counter).
    sends: Arc<crate::telemetry::Telemetry>,
}

/// Starts a listener on `source` owned by `runtime` (options already
/// validated). Must be called within a Tokio runtime.
pub(crate) fn start(
    runtime: &Runtime,
    registry: &Registry,
    source: Source,
    handler: Arc<dyn Handler>,
    options: ConsumeOptions,
) -> Result<ListenerHandle> {
    let dead_letter = dead_letter::resolve_topic(&source, &options.dead_letter)?;
    let control = Arc::new(Control::new(
        source.clone(),
        options.concurrency,
        runtime.presence(),
        runtime.shutdown_token(),
    ));
    let backend = Arc::clone(runtime.backend());
    let (acker, ack_queue) = acker::channel(source.topic().clone(), Arc::clone(&backend));
    let heartbeats = backend
        .capabilities()
        .has(Capability::LeaseExtension)
        .then(|| Arc::new(heartbeat::Heartbeats::new(options.heartbeat_after)));
    let ctx = Arc::new(Ctx {
        telemetry: crate::telemetry::ListenerTelemetry::new(backend.name(), &source),
        sends: Arc::clone(runtime.telemetry()),
        lanes: lanes::LaneWatch::of(&source, backend.exclusive_claim()),
        backend,
        source: source.clone(),
        handler,
        slots: Arc::new(Semaphore::new(options.concurrency)),
        options,
        dead_letter,
        control: Arc::clone(&control),
        jobs: TaskTracker::new(),
        inline_first_poll: AtomicBool::new(true),
        held_back: AtomicBool::new(false),
        acker,
        heartbeats,
    });
    registry.register(Arc::clone(&control));
    let span = tracing::info_span!(
        "listener",
        topic = %source.topic(),
        group = source.group().map(tracing::field::display),
    );
    runtime.spawn(run_loop::run(ctx, ack_queue).instrument(span));
    tracing::debug!(%source, "listener started");
    Ok(ListenerHandle { control })
}
