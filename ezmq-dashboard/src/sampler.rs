//! Keeps [`History`] while someone looks: the first page view starts a
//! task that takes a [`Snapshot`] every 10 seconds, and it stops once no
//! page was viewed for 15 minutes (or the router is dropped). A dashboard
//! nobody looks at reads nothing.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use ezmq_core::{Client, MqClient};
use tokio::task::JoinHandle;

use crate::history::{History, Sample, KEPT_MS};
use crate::snapshot::{self, now_ms, Snapshot};

/// How often the sampler reads the broker.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// The sampler of one router.
#[derive(Debug)]
pub(crate) struct Sampler {
    client: Client,
    history: Mutex<History>,
    /// When a page was last viewed, in Unix milliseconds.
    viewed_at_ms: AtomicI64,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Sampler {
    pub(crate) fn new(client: Client) -> Self {
        Sampler {
            client,
            history: Mutex::new(History::default()),
            viewed_at_ms: AtomicI64::new(0),
            task: Mutex::new(None),
        }
    }

    /// A page was viewed: samples from now on (for 15 minutes).
    pub(crate) fn viewed(self: &Arc<Self>) {
        self.viewed_at_ms.store(now_ms(), Ordering::Relaxed);
        let mut task = lock(&self.task);
        if task.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        let weak = Arc::downgrade(self);
        *task = Some(tokio::spawn(run(weak)));
    }

    /// Keeps `snapshot` in the history.
    pub(crate) fn record(&self, snapshot: &Snapshot) {
        let Ok(topics) = &snapshot.topics else {
            return;
        };
        let numbers: Vec<_> = topics
            .iter()
            .filter_map(|(topic, n)| n.as_ref().ok().map(|n| (topic.to_string(), n)))
            .collect();
        let sample = Sample::new(snapshot.at_ms, &numbers, snapshot.participants.as_deref());
        lock(&self.history).record(sample);
    }

    /// Reads the history.
    pub(crate) fn history(&self) -> MutexGuard<'_, History> {
        lock(&self.history)
    }
}

/// Samples every [`SAMPLE_EVERY`] until nobody viewed a page for 15
/// minutes or the sampler is gone.
async fn run(sampler: Weak<Sampler>) {
    loop {
        tokio::time::sleep(SAMPLE_EVERY).await;
        let Some(sampler) = sampler.upgrade() else {
            return;
        };
        if now_ms() - sampler.viewed_at_ms.load(Ordering::Relaxed) > KEPT_MS {
            tracing::debug!("dashboard sampler idle; stopped");
            return;
        }
        let snapshot = snapshot::take(sampler.client.admin()).await;
        sampler.record(&snapshot);
    }
}
