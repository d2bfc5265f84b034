//! A [`Backend`] wrapper that counts fetches, so the consume table can show
//! how many jobs a listener's `GETJOB` brings on average.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ezmq_disque::spi::{
    Backend, Capabilities, Delivery, DeliveryHandle, ExclusiveClaim, FanOut, Peek, QueueStats,
    ReplyChannel, Source,
};
use ezmq_disque::{
    async_trait, BrokerHealth, Bytes, DisqueBackend, JobId, PushOptions, Result, Topic,
};

/// Delegates everything to Disque, counting `receive` calls and the jobs
/// they return. Costs one extra boxed future per backend call.
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
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn abilities(&self) -> Capabilities {
        self.inner.abilities()
    }

    async fn publish(&self, topic: &Topic, body: Bytes, options: &PushOptions) -> Result<JobId> {
        self.inner.publish(topic, body, options).await
    }

    async fn receive(&self, source: &Source, max: usize, wait: Duration) -> Result<Vec<Delivery>> {
        let jobs = self.inner.receive(source, max, wait).await?;
        self.fetches.fetch_add(1, Ordering::Relaxed);
        self.fetched.fetch_add(jobs.len() as u64, Ordering::Relaxed);
        Ok(jobs)
    }

    async fn ack_batch(&self, handles: &[DeliveryHandle]) -> Result<()> {
        self.inner.ack_batch(handles).await
    }

    async fn publish_batch(
        &self,
        topic: &Topic,
        jobs: &[(Bytes, PushOptions)],
    ) -> Vec<Result<JobId>> {
        self.inner.publish_batch(topic, jobs).await
    }

    async fn pause_receiving(&self, source: &Source) -> Result<()> {
        self.inner.pause_receiving(source).await
    }

    fn delivery_deadline(&self) -> Option<Duration> {
        self.inner.delivery_deadline()
    }

    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }

    async fn health(&self) -> Result<BrokerHealth> {
        self.inner.health().await
    }

    fn queue_stats(&self) -> Option<&dyn QueueStats> {
        self.inner.queue_stats()
    }

    fn peek(&self) -> Option<&dyn Peek> {
        Backend::peek(&self.inner)
    }

    fn exclusive_claim(&self) -> Option<&dyn ExclusiveClaim> {
        self.inner.exclusive_claim()
    }

    fn fan_out(&self) -> Option<&dyn FanOut> {
        self.inner.fan_out()
    }

    fn job_store(&self) -> Option<&dyn ezmq_core::spi::JobStore> {
        self.inner.job_store()
    }

    fn reply_channel(&self) -> Option<&dyn ReplyChannel> {
        self.inner.reply_channel()
    }

    fn rate_limiter(&self) -> Option<&dyn ezmq_core::spi::RateLimiter> {
        self.inner.rate_limiter()
    }
}
