//! Deliveries and the handles that settle them.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::job::Job;

/// How one delivery is settled with its broker. Implemented by backends;
/// each delivery carries its own (a Disque job id, an AMQP delivery tag on
/// its channel, a Redis stream entry in its consumer group).
///
/// Settling twice is harmless: the second call may fail or do nothing, it
/// never settles another message.
#[async_trait]
pub trait Settle: Send + Sync + fmt::Debug + 'static {
    /// The message was processed: the broker forgets it.
    async fn ack(&self) -> Result<()>;

    /// The attempt failed: deliver the message again, no earlier than
    /// `delay` from now, as the next attempt. Backends without native
    /// redelivery delays re-publish it (attempt count in a header) and
    /// acknowledge this delivery; the message is never lost in between
    /// (it may at worst be delivered twice).
    async fn retry(&self, delay: Duration) -> Result<()>;

    /// The message was received but never processed (the listener is
    /// stopping): give it back at once, without counting an attempt where
    /// the broker allows it.
    async fn release(&self) -> Result<()>;

    /// A per-key rate limit holds the job back: deliver it again no
    /// earlier than `delay` from now as the **same** attempt (no attempt
    /// counted, whatever the broker's own counters say), with the header
    /// [`RESERVATION_HEADER`](crate::job_meta::RESERVATION_HEADER) set to
    /// `reservation`, or removed when it is `None`. Like
    /// [`Settle::retry`], never lost in between (at worst delivered
    /// twice). Backends that can report
    /// [`Capability::RateLimitByKey`](super::Capability::RateLimitByKey)
    /// among their [`Backend::abilities`](super::Backend::abilities);
    /// the default fails with
    /// [`Error::Unsupported`](crate::Error::Unsupported).
    async fn defer(&self, delay: Duration, reservation: Option<&str>) -> Result<()> {
        let _ = (delay, reservation);
        Err(crate::Error::Unsupported {
            backend: "this backend",
            capability: super::Capability::RateLimitByKey,
        })
    }

    /// Tells the broker the handler is still running so the message is not
    /// redelivered to someone else; returns how long the lease now lasts
    /// (zero when the broker never redelivers it). Fails with
    /// [`Error::Unsupported`](crate::Error::Unsupported) on brokers without
    /// leases ([`Capability::LeaseExtension`](super::Capability::LeaseExtension)).
    async fn extend_lease(&self) -> Result<Duration>;

    /// The concrete handle, for backends that settle many deliveries in
    /// one command ([`Backend::ack_batch`](super::Backend::ack_batch)).
    fn as_any(&self) -> &dyn Any;
}

/// The opaque handle a delivery carries: cheap to clone, settles the one
/// message it came with.
#[derive(Clone, Debug)]
pub struct DeliveryHandle(Arc<dyn Settle>);

impl DeliveryHandle {
    /// Wraps a backend's settle implementation.
    pub fn new(settle: impl Settle) -> Self {
        DeliveryHandle(Arc::new(settle))
    }

    /// See [`Settle::ack`].
    pub async fn ack(&self) -> Result<()> {
        self.0.ack().await
    }

    /// See [`Settle::retry`].
    pub async fn retry(&self, delay: Duration) -> Result<()> {
        self.0.retry(delay).await
    }

    /// See [`Settle::defer`].
    pub async fn defer(&self, delay: Duration, reservation: Option<&str>) -> Result<()> {
        self.0.defer(delay, reservation).await
    }

    /// See [`Settle::release`].
    pub async fn release(&self) -> Result<()> {
        self.0.release().await
    }

    /// See [`Settle::extend_lease`].
    pub async fn extend_lease(&self) -> Result<Duration> {
        self.0.extend_lease().await
    }

    /// The backend's concrete handle, when it is a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }
}

/// One message received by a listener, with the handle that settles it.
#[derive(Debug)]
pub struct Delivery {
    /// The message as the handler sees it.
    pub job: Job,
    /// Settles this delivery.
    pub handle: DeliveryHandle,
}

impl Delivery {
    /// A delivery of `job`, settled through `settle`.
    pub fn new(job: Job, settle: impl Settle) -> Self {
        Delivery {
            job,
            handle: DeliveryHandle::new(settle),
        }
    }
}
