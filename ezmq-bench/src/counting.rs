//! A [`Backend`] wrapper that counts fetches, so the consume table can show
//! how many jobs a listener's `GETJOB` brings on average.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ezmq_disque::{
    async_trait, Backend, Bytes, DisqueBackend, Job, JobId, PushOptions, Result, Topic,
};

/// Delegates everything to Disque, counting `fetch` calls and the jobs they
/// return. Costs one extra boxed future per backend call.
#[derive(Debug)]
pub(crate) struct Counting {
    inner: DisqueBackend,
    fetches: AtomicU64,
    fetched: AtomicU64,
}

impl Counting {
    /// Wraps a connected backend.
    pub(crate) fn new(inner: DisqueBackend) -> Self {
        Counting {
            inner,
            fetches: AtomicU64::new(0),
            fetched: AtomicU64::new(0),
        }
    }

    /// `(fetch calls, jobs fetched)` so far.
    pub(crate) fn fetch_counts(&self) -> (u64, u64) {
        (
            self.fetches.load(Ordering::Relaxed),
            self.fetched.load(Ordering::Relaxed),
        )
    }
}

#[async_trait]
impl Backend for Counting {
    async fn add(&self, topic: &Topic, body: Bytes, options: &PushOptions) -> Result<JobId> {
        self.inner.add(topic, body, options).await
    }

    async fn fetch(&self, topic: &Topic, max: usize, wait: Duration) -> Result<Vec<Job>> {
        let jobs = self.inner.fetch(topic, max, wait).await?;
        self.fetches.fetch_add(1, Ordering::Relaxed);
        self.fetched.fetch_add(jobs.len() as u64, Ordering::Relaxed);
        Ok(jobs)
    }

    async fn ack(&self, id: &JobId) -> Result<()> {
        self.inner.ack(id).await
    }

    async fn ack_many(&self, ids: &[JobId]) -> Result<()> {
        self.inner.ack_many(ids).await
    }

    async fn nack(&self, id: &JobId) -> Result<()> {
        self.inner.nack(id).await
    }

    async fn requeue(&self, id: &JobId) -> Result<()> {
        self.inner.requeue(id).await
    }

    async fn working(&self, id: &JobId) -> Result<Duration> {
        self.inner.working(id).await
    }

    async fn queue_len(&self, topic: &Topic) -> Result<u64> {
        self.inner.queue_len(topic).await
    }

    async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>> {
        self.inner.peek(topic, n).await
    }

    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
}
