//! A run claim whose give-back fails for a moment (a broker's failover, a
//! reply lost) is given back on a later try, so the crontab's next ticks
//! run, instead of being skipped until `max_run` (an hour by default).
//!
//! The broker is the test broker (embedded Disque, or the nodes in
//! `EZMQ_TEST_DISQUE_ADDRS`) over TCP; a wrapper around its backend makes
//! the first releases of run claims fail with a timeout.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use ezmq_core::spi::{
    Backend, Capabilities, ClaimOutcome, Delivery, DeliveryHandle, ExclusiveClaim, FanOut, Peek,
    QueueStats, Source,
};
use ezmq_core::{Client, ClientConfig, Error, JobId, MqClient, PushOptions, Result, Topic};
use ezmq_crontab::CrontabExt;
use ezmq_disque::DisqueBackend;
use ezmq_test_support::{init_tracing, unique_topic, TestBroker};
use tokio::sync::mpsc;

/// A real backend whose run-claim releases fail `failures` times first.
#[derive(Debug)]
struct FailingGiveBack {
    inner: DisqueBackend,
    failures: AtomicUsize,
    releases: AtomicUsize,
}

impl FailingGiveBack {
    fn claims(&self) -> &dyn ExclusiveClaim {
        self.inner
            .exclusive_claim()
            .expect("Disque has exclusive claims")
    }
}

#[async_trait]
impl Backend for FailingGiveBack {
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
        self.inner.receive(source, max, wait).await
    }
    async fn ack_batch(&self, handles: &[DeliveryHandle]) -> Result<()> {
        self.inner.ack_batch(handles).await
    }
    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
    fn queue_stats(&self) -> Option<&dyn QueueStats> {
        self.inner.queue_stats()
    }
    fn peek(&self) -> Option<&dyn Peek> {
        Backend::peek(&self.inner)
    }
    fn fan_out(&self) -> Option<&dyn FanOut> {
        self.inner.fan_out()
    }
    fn exclusive_claim(&self) -> Option<&dyn ExclusiveClaim> {
        Some(self)
    }
}

#[async_trait]
impl ExclusiveClaim for FailingGiveBack {
    async fn try_claim(&self, key: &Topic, hold: Duration) -> Result<bool> {
        self.claims().try_claim(key, hold).await
    }
    async fn claim(&self, key: &Topic, token: &str, hold: Duration) -> Result<ClaimOutcome> {
        self.claims().claim(key, token, hold).await
    }
    async fn holder(&self, key: &Topic) -> Result<Option<String>> {
        self.claims().holder(key).await
    }
    async fn release(&self, key: &Topic, token: &str) -> Result<bool> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        let fail = self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            return Err(Error::Timeout(Duration::from_secs(1)));
        }
        self.claims().release(key, token).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_give_back_is_tried_again_and_the_next_ticks_run() {
    init_tracing();
    let broker = TestBroker::start().await;
    let backend = Arc::new(FailingGiveBack {
        inner: DisqueBackend::connect(broker.config())
            .await
            .expect("the test broker"),
        failures: AtomicUsize::new(2),
        releases: AtomicUsize::new(0),
    });
    let client = Client::from_backend(backend.clone(), ClientConfig::default());
    let (tx, mut rx) = mpsc::unbounded_channel::<i64>();
    let name = unique_topic("cron-give-back");
    client
        .add_crontab(&name, "* * * * * *", move |tick: DateTime<Utc>| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(tick.timestamp());
                Ok::<(), Infallible>(())
            }
        })
        .await
        .expect("add_crontab");

    // The first run's give-back fails twice; without another try its run
    // claim would stay taken for an hour and no second tick would run.
    let mut ticks = Vec::new();
    while ticks.len() < 3 {
        let tick = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no tick within 10 s after ticks {ticks:?}"))
            .expect("the crontab is running");
        ticks.push(tick);
    }
    assert!(client.remove_crontab(&name).await);
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    assert!(
        backend.releases.load(Ordering::SeqCst) >= 4,
        "two failed give-backs, then one per run: {} releases",
        backend.releases.load(Ordering::SeqCst)
    );
    assert!(
        ticks.windows(2).all(|w| w[1] - w[0] <= 2),
        "ticks skipped after the failed give-back: {ticks:?}"
    );
}
