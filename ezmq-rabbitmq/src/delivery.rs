//! Deliveries and how they settle: ack, retry by re-publishing, release.

use std::any::Any;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::job_meta::RESERVATION_HEADER;
use ezmq_core::spi::{Capability, Settle};
use ezmq_core::{Error, Headers, Result, ATTEMPT_HEADER};
use lapin::options::{BasicAckOptions, BasicNackOptions};
use lapin::Channel;

use crate::backend::Inner;
use crate::error::RabbitError;
use crate::publish::{self, Outgoing};

/// A consumer channel and the delivery tags handed out on it and not yet
/// settled, which tell when one `multiple` ack is safe.
pub(crate) struct Tracker {
    pub(crate) channel: Channel,
    pub(crate) queue: String,
    outstanding: StdMutex<BTreeSet<u64>>,
    /// The largest delivery tag seen on the channel.
    last_tag: AtomicU64,
}

impl fmt::Debug for Tracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracker")
            .field("queue", &self.queue)
            .field("channel", &self.channel.id())
            .finish()
    }
}

impl Tracker {
    pub(crate) fn new(channel: Channel, queue: String) -> Self {
        Tracker {
            channel,
            queue,
            outstanding: StdMutex::new(BTreeSet::new()),
            last_tag: AtomicU64::new(0),
        }
    }

    /// Records the delivery tag `tag` as seen and returns the tags before
    /// it that never were. A channel numbers its deliveries 1, 2, 3, ...;
    /// a gap is a delivery the broker sent to a consumer already
    /// cancelled (after its `cancel-ok`), which lapin drops: unacked on
    /// the channel and held there unless given back.
    pub(crate) fn unseen_before(&self, tag: u64) -> std::ops::Range<u64> {
        let last = self.last_tag.fetch_max(tag, Ordering::AcqRel);
        if tag > last {
            last + 1..tag
        } else {
            0..0
        }
    }

    pub(crate) fn hand_out(&self, tag: u64) {
        if let Ok(mut set) = self.outstanding.lock() {
            set.insert(tag);
        }
    }

    /// How many deliveries are handed out and not yet settled.
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding.lock().map_or(0, |set| set.len())
    }

    fn forget(&self, tags: &[u64]) {
        if let Ok(mut set) = self.outstanding.lock() {
            for tag in tags {
                set.remove(tag);
            }
        }
    }

    /// True when every outstanding tag up to the largest of `tags` is in
    /// `tags`: one `multiple` ack then settles exactly them.
    fn covers(&self, tags: &[u64]) -> bool {
        let Some(max) = tags.iter().max() else {
            return false;
        };
        self.outstanding
            .lock()
            .is_ok_and(|set| set.range(..=max).count() == tags.len())
    }

    async fn ack(&self, tag: u64, multiple: bool) -> Result<(), RabbitError> {
        self.channel
            .basic_ack(tag, BasicAckOptions { multiple })
            .await
            .map_err(|e| RabbitError::amqp("basic.ack", self.queue.as_str(), e))
    }

    /// Gives one delivery back to the queue (`basic.nack`, requeue).
    pub(crate) async fn nack(&self, tag: u64) -> Result<(), RabbitError> {
        self.channel
            .basic_nack(
                tag,
                BasicNackOptions {
                    multiple: false,
                    requeue: true,
                },
            )
            .await
            .map_err(|e| RabbitError::amqp("basic.nack", self.queue.as_str(), e))
    }
}

/// What a retry re-publishes.
pub(crate) struct Message {
    pub(crate) body: Bytes,
    pub(crate) headers: Headers,
    pub(crate) message_id: String,
    pub(crate) attempt: u32,
}

/// The settle handle of one RabbitMQ delivery.
pub(crate) struct RabbitDelivery {
    pub(crate) inner: Arc<Inner>,
    pub(crate) tracker: Arc<Tracker>,
    pub(crate) tag: u64,
    pub(crate) settled: AtomicBool,
    pub(crate) message: Message,
}

impl fmt::Debug for RabbitDelivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitDelivery")
            .field("queue", &self.tracker.queue)
            .field("tag", &self.tag)
            .field("settled", &self.settled.load(Ordering::Relaxed))
            .finish()
    }
}

impl RabbitDelivery {
    /// Takes the right to settle; false when already settled.
    pub(crate) fn claim(&self) -> bool {
        !self.settled.swap(true, Ordering::AcqRel)
    }

    async fn finish<F, Fut>(&self, op: F) -> Result<()>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<(), RabbitError>>,
    {
        let result = op().await;
        // Forgotten once the frame left (or the channel is gone): while it
        // is in flight no batch ack may cover this tag.
        self.tracker.forget(&[self.tag]);
        Ok(result?)
    }
}

#[async_trait]
impl Settle for RabbitDelivery {
    async fn ack(&self) -> Result<()> {
        if !self.claim() {
            return Ok(());
        }
        self.finish(|| self.tracker.ack(self.tag, false)).await
    }

    async fn retry(&self, delay: Duration) -> Result<()> {
        let mut headers = self.message.headers.clone();
        headers.insert(
            ATTEMPT_HEADER,
            self.message.attempt.saturating_add(1).to_string(),
        );
        self.republish(headers, delay).await
    }

    /// As a retry, with the same attempt number and the reservation
    /// header.
    async fn defer(&self, delay: Duration, reservation: Option<&str>) -> Result<()> {
        let mut headers = self.message.headers.clone();
        headers.insert(ATTEMPT_HEADER, self.message.attempt.to_string());
        match reservation {
            Some(mark) => {
                headers.insert(RESERVATION_HEADER, mark.to_owned());
            }
            None => {
                headers.remove(RESERVATION_HEADER);
            }
        }
        self.republish(headers, delay).await
    }

    async fn release(&self) -> Result<()> {
        if !self.claim() {
            return Ok(());
        }
        self.finish(|| self.tracker.nack(self.tag)).await
    }

    async fn extend_lease(&self) -> Result<Duration> {
        Err(Error::Unsupported {
            backend: crate::BACKEND_NAME,
            capability: Capability::LeaseExtension,
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl RabbitDelivery {
    /// Publishes a copy with `headers` to come again after `delay`, then
    /// acks this delivery once the copy is confirmed.
    async fn republish(&self, headers: Headers, delay: Duration) -> Result<()> {
        if !self.claim() {
            return Ok(());
        }
        let out = Outgoing {
            topic: &self.tracker.queue,
            queue: &self.tracker.queue,
            body: &self.message.body,
            headers: &headers,
            message_id: &self.message.message_id,
            delay: Some(delay),
            ttl: None,
            declare: false,
        };
        match publish::send(&self.inner, &out).await {
            // The copy is confirmed: the original can go.
            Ok(()) => self.finish(|| self.tracker.ack(self.tag, false)).await,
            Err(err) => {
                // Not lost: back to the queue now (counted as a redelivery).
                let _ = self.finish(|| self.tracker.nack(self.tag)).await;
                Err(err)
            }
        }
    }
}

/// Acks `deliveries` (all of one tracker, already claimed): with one
/// `multiple` ack when they are exactly the outstanding tags up to the
/// largest, otherwise one ack each.
pub(crate) async fn ack_group(tracker: &Tracker, tags: &[u64]) -> Result<()> {
    let result = if tags.len() > 1 && tracker.covers(tags) {
        let max = tags.iter().copied().max().unwrap_or_default();
        tracker.ack(max, true).await
    } else {
        let mut last = Ok(());
        for tag in tags {
            if let Err(err) = tracker.ack(*tag, false).await {
                last = Err(err);
            }
        }
        last
    };
    tracker.forget(tags);
    Ok(result?)
}
