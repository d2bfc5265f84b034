//! An in-memory broker: the whole [`Backend`] SPI in this process, so the
//! listener runtime and the features built on it can be tested without a
//! broker.
//!
//! A [`MemoryBroker`] holds the queues; each [`MemoryBroker::backend`] is
//! one connection to it (a separate "process" for tests that make
//! several clients). What it does:
//!
//! - per-topic FIFO queues; delayed messages promoted when due (a waiting
//!   receiver wakes at the due time); `PushOptions::ttl` drops a message
//!   not delivered in time;
//! - leases: a delivery not settled within the receiving connection's
//!   [`MemoryConfig::lease`] is redelivered as the next attempt; settling
//!   is ack, retry after a delay (the next attempt), release (same
//!   attempt, first in line) and lease extension;
//! - every optional ability: queue stats, peek, exclusive claims,
//!   idempotent pushes by message id (within
//!   [`MemoryConfig::message_id_window`]), consumer groups
//!   ([`FanOut`]) and reply inboxes
//!   ([`ReplyChannel`]);
//! - [`Backend::close`] makes the connection's later calls (and its
//!   deliveries' settles) fail with [`Error::Shutdown`] and drops the reply
//!   inboxes it opened; its unsettled deliveries come back when their
//!   leases run out, as after a crash;
//! - [`MemoryBroker::stop`] / [`MemoryBroker::start`] take the broker down
//!   and back (calls fail with a retryable error meanwhile; the messages
//!   stay), for tests of outages and restarts.
//!
//! It spawns no task: timers live inside the calls that wait.

mod fan_out;
mod inspect;
mod jobs;
mod queue;
mod reply;
mod settle;
mod state;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{
    Backend, Capabilities, Capability, Delivery, ExclusiveClaim, FanOut, Peek, QueueStats,
    ReplyChannel, Source,
};
use ezmq_core::{BrokerHealth, Error, JobId, PushOptions, Result, Topic, MESSAGE_ID_HEADER};
use tokio::time::Instant;

use queue::Message;
use settle::MemoryDelivery;
use state::{lock, State};

/// The backend name in errors and spans.
pub const MEMORY_BACKEND_NAME: &str = "memory";

/// Why a call on the in-memory broker failed (the source of an
/// [`Error::Backend`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// A delivery was settled or extended after it stopped being leased to
    /// its consumer: settled already, or its lease ran out and the message
    /// went back to the queue.
    #[error(
        "message {id} of {queue} is no longer leased to this consumer \
         (settled already, or its lease ran out and it was redelivered)"
    )]
    NotLeased {
        /// The message id.
        id: String,
        /// The queue it was delivered from.
        queue: String,
    },
    /// The broker is down ([`MemoryBroker::stop`]) until
    /// [`MemoryBroker::start`]; retryable.
    #[error("the in-memory broker is down (stopped by the test)")]
    Unavailable,
}

impl From<MemoryError> for Error {
    fn from(err: MemoryError) -> Self {
        let retryable = matches!(err, MemoryError::Unavailable);
        Error::backend(err, retryable)
    }
}

/// Settings of one connection to a [`MemoryBroker`].
///
/// ```
/// use std::time::Duration;
/// use ezmq_test_support::MemoryConfig;
///
/// let config = MemoryConfig::default().with_lease(Duration::from_secs(1));
/// assert_eq!(config.lease, Duration::from_secs(1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryConfig {
    /// How long a message received through this connection stays with its
    /// consumer without being settled or extended before it is
    /// redelivered. Default 30 s.
    pub lease: Duration,
    /// How long a message id pushed through this connection is remembered:
    /// a push to the same topic with the same id within it stores nothing
    /// and returns the first push's id. Default 24 h.
    pub message_id_window: Duration,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            lease: Duration::from_secs(30),
            message_id_window: Duration::from_secs(24 * 3600),
        }
    }
}

impl MemoryConfig {
    /// Sets [`MemoryConfig::lease`] (zero is taken as 1 ms).
    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(1));
        self
    }

    /// Sets [`MemoryConfig::message_id_window`].
    #[must_use]
    pub fn with_message_id_window(mut self, window: Duration) -> Self {
        self.message_id_window = window;
        self
    }
}

/// An in-memory broker: cheap to clone (clones share the queues), hands
/// out connections ([`MemoryBackend`]s). See the [module docs](self).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> ezmq_core::Result<()> {
/// use std::time::Duration;
/// use ezmq_core::spi::Source;
/// use ezmq_core::{Client, ClientConfig, MqClient, Topic};
/// use ezmq_test_support::MemoryBroker;
///
/// let broker = MemoryBroker::new();
/// let producer = Client::new(broker.backend(), ClientConfig::default());
/// let consumer = Client::new(broker.backend(), ClientConfig::default());
/// producer.push("orders", "order 1".into()).await?;
///
/// let source = Source::Topic(Topic::new("orders")?);
/// let backend = consumer.runtime().backend();
/// let mut got = backend.receive(&source, 10, Duration::from_secs(1)).await?;
/// assert_eq!(got.len(), 1);
/// let delivery = got.remove(0);
/// assert_eq!(&delivery.job.body()[..], b"order 1");
/// delivery.handle.ack().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemoryBroker {
    state: Arc<Mutex<State>>,
    down: Arc<AtomicBool>,
}

impl MemoryBroker {
    /// An empty broker.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new connection with the default [`MemoryConfig`].
    pub fn backend(&self) -> MemoryBackend {
        self.backend_with(MemoryConfig::default())
    }

    /// Takes the broker down, as a broker restarting: every call through
    /// any connection (and every settle) fails with a retryable
    /// [`Error::Backend`] ([`MemoryError::Unavailable`]), and receivers
    /// waiting now return that error at once, until
    /// [`MemoryBroker::start`]. Messages, leases (their clocks keep
    /// running), groups, claims and inboxes are kept, as by a broker that
    /// persists its state.
    pub fn stop(&self) {
        self.down.store(true, Ordering::Release);
        lock(&self.state).wake_all();
        tracing::debug!("in-memory broker stopped");
    }

    /// Brings a stopped broker back ([`MemoryBroker::stop`]).
    pub fn start(&self) {
        self.down.store(false, Ordering::Release);
        tracing::debug!("in-memory broker started");
    }

    /// False between [`MemoryBroker::stop`] and [`MemoryBroker::start`].
    pub fn is_up(&self) -> bool {
        !self.down.load(Ordering::Acquire)
    }

    /// Fails with [`Error::Shutdown`] once `conn` is closed, with
    /// [`MemoryError::Unavailable`] while the broker is down.
    fn usable(&self, conn: &Connection) -> Result<()> {
        conn.ensure_open()?;
        if self.is_up() {
            Ok(())
        } else {
            Err(MemoryError::Unavailable.into())
        }
    }

    /// A new connection with `config`.
    pub fn backend_with(&self, config: MemoryConfig) -> MemoryBackend {
        let id = lock(&self.state).next_seq();
        MemoryBackend {
            broker: self.clone(),
            conn: Arc::new(Connection {
                id,
                config,
                closed: AtomicBool::new(false),
            }),
        }
    }
}

/// One connection's identity and settings.
#[derive(Debug)]
struct Connection {
    id: u64,
    config: MemoryConfig,
    closed: AtomicBool,
}

impl Connection {
    fn ensure_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }
}

/// One connection to a [`MemoryBroker`], implementing [`Backend`] with
/// every capability. See the [module docs](self) and
/// [`MemoryBroker`]'s example.
#[derive(Clone, Debug)]
pub struct MemoryBackend {
    broker: MemoryBroker,
    conn: Arc<Connection>,
}

impl MemoryBackend {
    /// A connection to a new broker of its own.
    pub fn new() -> Self {
        MemoryBroker::new().backend()
    }

    /// The broker this connection belongs to (for more connections).
    pub fn broker(&self) -> &MemoryBroker {
        &self.broker
    }

    /// This connection's settings.
    pub fn config(&self) -> &MemoryConfig {
        &self.conn.config
    }

    fn ensure_open(&self) -> Result<()> {
        self.broker.usable(&self.conn)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.broker.state)
    }

    /// Builds the message a push stores and the id it returns.
    fn message(state: &mut State, body: Bytes, options: &PushOptions, now: Instant) -> Message {
        // Core stamped the job: its id is in the headers. A message built
        // without core (a test calling the backend directly) gets one of
        // the broker's own.
        let headers = options.headers.clone();
        let id = match (headers.get(MESSAGE_ID_HEADER), &options.message_id) {
            (Some(id), _) => JobId::new(id),
            (None, Some(id)) => JobId::new(id.as_str()),
            (None, None) => JobId::new(format!("mem-{:012}", state.next_seq())),
        };
        Message {
            id,
            body,
            headers,
            attempt: 1,
            expires_at: options.ttl.map(|ttl| now + ttl),
        }
    }

    /// Stores `message` in the queue of `source`, delayed by `delay`.
    fn enqueue(
        state: &mut State,
        source: &Source,
        message: Message,
        delay: Option<Duration>,
        now: Instant,
    ) {
        let due = delay
            .filter(|d| !d.is_zero())
            .map(|d| (now + d, state.next_seq()));
        state.queue(source).add(message, due);
    }
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Backend for MemoryBackend {
    fn name(&self) -> &'static str {
        MEMORY_BACKEND_NAME
    }

    fn abilities(&self) -> Capabilities {
        Capabilities::none()
            .with(Capability::DelayedDelivery)
            .with(Capability::LeaseExtension)
            .with(Capability::IdempotentPush)
            .with(Capability::RateLimitByKey)
    }

    async fn publish(&self, topic: &Topic, body: Bytes, options: &PushOptions) -> Result<JobId> {
        self.ensure_open()?;
        let now = Instant::now();
        let mut state = self.state();
        if let Some(id) = &options.message_id {
            if let Some(first) = state.seen(topic, id, now) {
                tracing::debug!(%topic, message_id = %id, "duplicate push by message id; nothing stored");
                return Ok(first);
            }
        }
        let message = Self::message(&mut state, body, options, now);
        let id = message.id.clone();
        Self::enqueue(
            &mut state,
            &Source::Topic(topic.clone()),
            message,
            options.delay,
            now,
        );
        if let Some(message_id) = &options.message_id {
            let until = now + self.conn.config.message_id_window;
            state.remember(topic, message_id, id.clone(), until);
        }
        Ok(id)
    }

    async fn receive(&self, source: &Source, max: usize, wait: Duration) -> Result<Vec<Delivery>> {
        self.ensure_open()?;
        let deadline = Instant::now() + wait;
        let notify = self.state().queue(source).notify();
        loop {
            // Registered before looking, so a push (or a stop) in between
            // wakes it.
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            self.ensure_open()?;
            let wake = {
                let mut state = self.state();
                let now = Instant::now();
                let (queue, seq) = state.queue_and_seq(source);
                queue.sweep(now);
                let until = now + self.conn.config.lease;
                let taken = queue.lease(max, now, until, || {
                    *seq += 1;
                    *seq
                });
                if !taken.is_empty() {
                    let topic = source.topic();
                    return Ok(taken
                        .into_iter()
                        .map(|(token, message)| {
                            let job = message.job(topic);
                            let settle = MemoryDelivery::new(
                                self.broker.clone(),
                                Arc::clone(&self.conn),
                                source.clone(),
                                token,
                                message.id,
                            );
                            Delivery::new(job, settle)
                        })
                        .collect());
                }
                if now >= deadline {
                    return Ok(Vec::new());
                }
                queue.next_wake().map_or(deadline, |at| at.min(deadline))
            };
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    async fn close(&self) -> Result<()> {
        if self.conn.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let id = self.conn.id;
        self.state().inboxes.retain(|_, inbox| inbox.owner != id);
        tracing::debug!(connection = id, "in-memory backend closed");
        Ok(())
    }

    async fn health(&self) -> Result<BrokerHealth> {
        self.health_report()
    }

    fn queue_stats(&self) -> Option<&dyn QueueStats> {
        Some(self)
    }

    fn peek(&self) -> Option<&dyn Peek> {
        Some(self)
    }

    fn exclusive_claim(&self) -> Option<&dyn ExclusiveClaim> {
        Some(self)
    }

    fn fan_out(&self) -> Option<&dyn FanOut> {
        Some(self)
    }

    fn job_store(&self) -> Option<&dyn ezmq_core::spi::JobStore> {
        Some(self)
    }

    fn reply_channel(&self) -> Option<&dyn ReplyChannel> {
        Some(self)
    }
}
