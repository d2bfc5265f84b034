//! Metric handles, registered once and reused.
//!
//! Building a metric key allocates (its labels), so nothing on a hot path
//! goes through the `metrics` macros: a listener registers its handles when
//! it starts, a client the handles of a topic the first time it pushes to
//! it. Each later update is one call on a handle, an atomic add with a
//! typical recorder and nothing at all without one.
//!
//! So the recorder must be installed before the client connects (or at
//! least before the listeners start and the first push of each topic):
//! handles taken with no recorder stay no-ops.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::{OnceLock, PoisonError, RwLock};
use std::time::Instant;

use metrics::{Counter, Gauge, Histogram, Label};
use tracing::Span;

use crate::spi::Source;
use crate::topic::Topic;

use super::names;
use super::spans::record_error;

fn base_labels(system: &'static str, topic: &Topic) -> Vec<Label> {
    vec![
        Label::new(names::SYSTEM, system),
        Label::new(names::DESTINATION, topic.as_str().to_owned()),
    ]
}

fn with(mut labels: Vec<Label>, key: &'static str, value: &'static str) -> Vec<Label> {
    labels.push(Label::new(key, value));
    labels
}

/// A fast hasher for the per-topic maps (topic names, not attacker-chosen
/// keys): the push path looks a topic up on every push, and SipHash was
/// most of that lookup's cost. FxHash's word-at-a-time mix.
#[derive(Clone, Copy, Debug, Default)]
struct FxBuildHasher;

impl BuildHasher for FxBuildHasher {
    type Hasher = FxHasher;

    fn build_hasher(&self) -> FxHasher {
        FxHasher(0)
    }
}

#[derive(Debug)]
struct FxHasher(u64);

impl FxHasher {
    const K: u64 = 0x517c_c1b7_2722_0a95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::K);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The handles of one topic's pushes.
#[derive(Debug)]
pub(crate) struct SendHandles {
    sent: Counter,
    duration: Histogram,
}

/// Metric handles a client shares between its clones: per pushed topic,
/// and per feature-crate histogram and topic. Reached through
/// [`Runtime::telemetry`](crate::spi::Runtime::telemetry).
pub struct Telemetry {
    system: &'static str,
    send: RwLock<HashMap<Topic, SendHandles, FxBuildHasher>>,
    histograms: RwLock<HashMap<(&'static str, Topic), Histogram, FxBuildHasher>>,
}

impl fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Telemetry")
            .field("system", &self.system)
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Handles for a client of backend `system`.
    pub(crate) fn new(system: &'static str) -> Self {
        Telemetry {
            system,
            send: RwLock::default(),
            histograms: RwLock::default(),
        }
    }

    /// The broker's name (`messaging.system`).
    pub fn system(&self) -> &'static str {
        self.system
    }

    /// Histogram `name` of `topic`, labelled `messaging.system` and
    /// `messaging.destination.name`; registered on first use, then cached.
    pub fn histogram(&self, name: &'static str, topic: &Topic) -> Histogram {
        let key = (name, topic.clone());
        if let Some(h) = self
            .histograms
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return h.clone();
        }
        let h = metrics::histogram!(name, base_labels(self.system, topic));
        self.histograms
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_insert(h)
            .clone()
    }

    /// Records a push that the broker confirmed after `started`.
    pub(crate) fn sent(&self, topic: &Topic, started: Instant) {
        self.sent_many(topic, started, 1);
    }

    /// [`Telemetry::sent`] for `n` jobs sent together (a batch): one clock
    /// read and one lookup for all of them.
    pub(crate) fn sent_many(&self, topic: &Topic, started: Instant, n: usize) {
        if n == 0 {
            return;
        }
        let seconds = started.elapsed().as_secs_f64();
        // The hot path: a read lock and one lookup, no clone.
        if let Some(handles) = self
            .send
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(topic)
        {
            handles.sent.increment(n as u64);
            handles.duration.record_many(seconds, n);
            return;
        }
        let labels = base_labels(self.system, topic);
        let handles = SendHandles {
            sent: metrics::counter!(names::SENT_MESSAGES, labels.clone()),
            duration: metrics::histogram!(
                names::OPERATION_DURATION,
                with(labels, names::OPERATION_NAME, "send")
            ),
        };
        let mut send = self.send.write().unwrap_or_else(PoisonError::into_inner);
        let handles = send.entry(topic.clone()).or_insert(handles);
        handles.sent.increment(n as u64);
        handles.duration.record_many(seconds, n);
    }

    /// Records a push that failed with `error_type` after `started` (a
    /// rare path: it registers its handles each time).
    pub(crate) fn send_failed(&self, topic: &Topic, started: Instant, error_type: &'static str) {
        let labels = with(
            base_labels(self.system, topic),
            names::ERROR_TYPE,
            error_type,
        );
        metrics::counter!(names::SENT_MESSAGES, labels.clone()).increment(1);
        let labels = with(labels, names::OPERATION_NAME, "send");
        metrics::histogram!(names::OPERATION_DURATION, labels)
            .record(started.elapsed().as_secs_f64());
    }
}

/// How one delivery attempt was settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settle {
    /// Succeeded: acknowledged.
    Ack,
    /// Failed: handed back to come again after a backoff.
    Retry,
    /// Failed for good: dead-lettered (or dropped with `DeadLetter::Drop`).
    DeadLetter {
        /// The handler said the error is permanent.
        permanent: bool,
    },
    /// Aborted at the end of a stop's grace period and given back.
    Release,
    /// At most once: settled before it ran; `failed` says how it ended.
    Taken {
        /// The handler failed (the job is not retried).
        failed: bool,
    },
}

impl Settle {
    fn action(self) -> &'static str {
        match self {
            Settle::Ack | Settle::Taken { .. } => "ack",
            Settle::Retry => "retry",
            Settle::DeadLetter { .. } => "dead_letter",
            Settle::Release => "release",
        }
    }

    fn error_type(self) -> Option<&'static str> {
        match self {
            Settle::Ack | Settle::Taken { failed: false } => None,
            Settle::Retry | Settle::Taken { failed: true } => Some(names::ERROR_HANDLER),
            Settle::DeadLetter { permanent: true } => Some(names::ERROR_PERMANENT),
            Settle::DeadLetter { permanent: false } => Some(names::ERROR_HANDLER),
            Settle::Release => Some(names::ERROR_ABORTED),
        }
    }
}

/// A listener's metric handles: the success path's registered when it
/// starts, each failure's on its first use (so a scrape shows no failure
/// series that never moved).
#[derive(Debug)]
pub(crate) struct ListenerTelemetry {
    labels: Vec<Label>,
    consumed: Counter,
    duration_ok: Histogram,
    in_flight: Gauge,
    retried: OnceLock<Counter>,
    dead_lettered: OnceLock<Counter>,
    dead_lettered_permanent: OnceLock<Counter>,
    duration_failed: OnceLock<Histogram>,
    duration_permanent: OnceLock<Histogram>,
    duration_aborted: OnceLock<Histogram>,
}

impl ListenerTelemetry {
    /// Registers the handles of a listener on `source` of backend `system`.
    pub(crate) fn new(system: &'static str, source: &Source) -> Self {
        let mut labels = base_labels(system, source.topic());
        if let Some(group) = source.group() {
            labels.push(Label::new(names::CONSUMER_GROUP, group.as_str().to_owned()));
        }
        ListenerTelemetry {
            consumed: metrics::counter!(names::CONSUMED_MESSAGES, labels.clone()),
            duration_ok: metrics::histogram!(names::PROCESS_DURATION, labels.clone()),
            in_flight: metrics::gauge!(names::IN_FLIGHT_HANDLERS, labels.clone()),
            labels,
            retried: OnceLock::new(),
            dead_lettered: OnceLock::new(),
            dead_lettered_permanent: OnceLock::new(),
            duration_failed: OnceLock::new(),
            duration_permanent: OnceLock::new(),
            duration_aborted: OnceLock::new(),
        }
    }

    /// The listener's [`names::QUEUE_DEPTH`] gauge (registered on first
    /// call: only listeners whose backend counts messages have one).
    pub(crate) fn queue_depth(&self) -> Gauge {
        metrics::gauge!(names::QUEUE_DEPTH, self.labels.clone())
    }

    /// The listener's labels and `error.type = error_type`.
    fn failed(&self, error_type: &'static str) -> Vec<Label> {
        with(self.labels.clone(), names::ERROR_TYPE, error_type)
    }

    /// A handler starts: counts the message consumed and the handler in
    /// flight until the returned guard is finished or dropped.
    pub(crate) fn start(&self) -> Processing<'_> {
        self.consumed.increment(1);
        self.in_flight.increment(1.0);
        Processing {
            telemetry: self,
            started: Instant::now(),
        }
    }

    fn duration(&self, settle: Settle) -> &Histogram {
        let (cell, error_type) = match settle {
            Settle::Ack | Settle::Taken { failed: false } => return &self.duration_ok,
            Settle::Retry | Settle::Taken { failed: true } => {
                (&self.duration_failed, names::ERROR_HANDLER)
            }
            Settle::DeadLetter { permanent: false } => {
                (&self.duration_failed, names::ERROR_HANDLER)
            }
            Settle::DeadLetter { permanent: true } => {
                (&self.duration_permanent, names::ERROR_PERMANENT)
            }
            Settle::Release => (&self.duration_aborted, names::ERROR_ABORTED),
        };
        cell.get_or_init(|| metrics::histogram!(names::PROCESS_DURATION, self.failed(error_type)))
    }

    fn count(&self, settle: Settle) {
        let (cell, name, error_type) = match settle {
            Settle::Retry => (&self.retried, names::RETRIED_MESSAGES, names::ERROR_HANDLER),
            Settle::DeadLetter { permanent: false } => (
                &self.dead_lettered,
                names::DEAD_LETTERED_MESSAGES,
                names::ERROR_HANDLER,
            ),
            Settle::DeadLetter { permanent: true } => (
                &self.dead_lettered_permanent,
                names::DEAD_LETTERED_MESSAGES,
                names::ERROR_PERMANENT,
            ),
            _ => return,
        };
        cell.get_or_init(|| metrics::counter!(name, self.failed(error_type)))
            .increment(1);
    }
}

/// One handler run, from [`ListenerTelemetry::start`].
#[derive(Debug)]
pub(crate) struct Processing<'a> {
    telemetry: &'a ListenerTelemetry,
    started: Instant,
}

impl Processing<'_> {
    /// The handler ended and the job is settled as `settle`: records the
    /// duration and counters, marks the current (`process`) span failed
    /// when it did, and emits a DEBUG `settle` event in it.
    pub(crate) fn finish(self, settle: Settle) {
        let t = self.telemetry;
        t.duration(settle)
            .record(self.started.elapsed().as_secs_f64());
        t.count(settle);
        let action = settle.action();
        if let Some(error_type) = settle.error_type() {
            record_error(&Span::current(), error_type);
        }
        tracing::debug!(
            "messaging.operation.type" = "settle",
            "ezmq.settle.action" = action,
            "settle: {action}"
        );
    }
}

impl Drop for Processing<'_> {
    fn drop(&mut self) {
        self.telemetry.in_flight.decrement(1.0);
    }
}

/// Counts a cron tick of job `name`: `outcome` is `run`, `skipped` (the
/// previous run still going, or the claim failed) or `missed` (the process
/// was too late for it).
pub fn cron_tick(system: &'static str, name: &str, outcome: &'static str) {
    metrics::counter!(
        names::CRON_TICKS,
        names::SYSTEM => system,
        names::CRON_NAME => name.to_owned(),
        names::CRON_OUTCOME => outcome,
    )
    .increment(1);
}
