//! A listener's consumer of one topic: a thread that owns the group
//! member (librdkafka's `BaseConsumer`), polls records into a buffer and
//! commits the lowest unfinished offset of each partition; `receive`
//! hands records out of that buffer, and the deliveries' settles mark
//! them finished, retried or released.

mod offsets;
pub(crate) mod record;
mod state;
mod thread;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ezmq_core::spi::Delivery;
use ezmq_core::{Error, Result, Topic};

pub(crate) use record::Record;
pub(crate) use state::State;
pub(crate) use thread::member_config;

use crate::config::KafkaConfig;
use crate::settle::KafkaDelivery;

/// What the consumer thread and the async side share.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    /// A handed-out record was settled (a revoke waits for them), or
    /// records were taken from the buffer (a thread with a full buffer
    /// waits for room).
    settled: Condvar,
    /// Records arrived in the buffer (or a retry came due).
    arrived: tokio::sync::Notify,
    /// The thread ends (the client closed or was dropped).
    stop: AtomicBool,
    /// Closing: a revoke does not wait for running jobs.
    closing: AtomicBool,
    /// The ezmq topic, for the jobs and the logs.
    pub(crate) topic: Topic,
    /// The Kafka topic read.
    pub(crate) kafka_topic: String,
    /// The consumer group (a queue's is named as its topic; a broadcast
    /// group's is its own).
    pub(crate) group: String,
}

impl Shared {
    /// The state, also after a panic elsewhere (the state stays
    /// consistent: every change is made under one lock, without calls
    /// that panic).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Wakes whoever waits for a settle (a revoke).
    pub(crate) fn notify_settled(&self) {
        self.settled.notify_all();
    }

    /// Wakes waiting receives.
    pub(crate) fn notify_arrived(&self) {
        self.arrived.notify_waiters();
    }
}

/// The consumer of one topic's group, owned by the backend.
#[derive(Debug)]
pub(crate) struct TopicConsumer {
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl TopicConsumer {
    /// Starts the thread for `kafka_topic` read by consumer group
    /// `group`; it joins the group at the first
    /// [`TopicConsumer::receive`].
    pub(crate) fn start(
        config: &KafkaConfig,
        topic: Topic,
        kafka_topic: String,
        group: String,
    ) -> Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            settled: Condvar::new(),
            arrived: tokio::sync::Notify::new(),
            stop: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            topic,
            kafka_topic,
            group,
        });
        let consumer = thread::create(config, &shared)?;
        let running = Arc::clone(&shared);
        let poll_wait = config.fetch_wait.min(Duration::from_millis(100));
        let handle = std::thread::Builder::new()
            .name(format!("ezmq-kafka {}", shared.topic))
            .spawn(move || thread::run(consumer, &running, poll_wait))
            .map_err(|err| {
                Error::backend(format!("starting a Kafka consumer thread: {err}"), false)
            })?;
        Ok(TopicConsumer {
            shared,
            thread: Mutex::new(Some(handle)),
        })
    }

    /// Up to `max` records, waiting up to `wait` for the first.
    pub(crate) async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>> {
        let deadline = Instant::now() + wait;
        let max = max.max(1);
        loop {
            let notified = self.shared.arrived.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (records, next_due) = {
                let mut state = self.shared.lock();
                if let Some(failure) = state.failure.take() {
                    return Err(Error::backend(failure, true));
                }
                state.wanted = true;
                state.take(max, Instant::now())
            };
            if !records.is_empty() {
                // Room in the buffer: a thread waiting for it fetches again.
                self.shared.notify_settled();
                return Ok(records
                    .into_iter()
                    .map(|record| KafkaDelivery::deliver(&self.shared, record))
                    .collect());
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            let until = next_due.map_or(deadline, |due| due.min(deadline));
            let _ = tokio::time::timeout(until.saturating_duration_since(now), notified).await;
        }
    }

    /// The listener stops taking jobs for a while: what is buffered goes
    /// back to the group (the member leaves once its running jobs are
    /// settled); the next receive joins again.
    pub(crate) fn pause(&self) {
        self.shared.lock().wanted = false;
    }

    /// Tells the thread to end: it leaves the group without waiting for
    /// running jobs (their records come back to the group).
    fn signal_stop(&self) {
        self.shared.closing.store(true, Ordering::Release);
        self.shared.stop.store(true, Ordering::Release);
        self.shared.notify_settled();
    }

    /// Ends the thread: it stores the finished offsets, commits them and
    /// leaves the group; running jobs' records come back to the group.
    pub(crate) async fn close(&self) {
        self.signal_stop();
        let handle = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let topic = self.shared.topic.clone();
            if tokio::task::spawn_blocking(move || handle.join())
                .await
                .is_err()
            {
                tracing::warn!(topic = %topic, "a Kafka consumer thread did not end cleanly");
            }
        }
    }
}

impl Drop for TopicConsumer {
    fn drop(&mut self) {
        self.signal_stop();
    }
}

/// The consumers of one backend, by consumer group.
pub(crate) type Consumers = Mutex<HashMap<String, Arc<TopicConsumer>>>;
