//! The backend SPI: what a broker crate (Disque today; RabbitMQ, Redis,
//! Kafka later) implements so that [`Client`](crate::Client) and every
//! feature built on it work unchanged.
//!
//! The core trait is deliberately small. Abilities only some brokers have are
//! separate traits ([`ExclusiveClaim`]) that features ask for with a bound.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::Result;
use crate::job::{Job, JobId};
use crate::push_options::PushOptions;
use crate::topic::Topic;

/// A message broker as seen by ezmq: add, fetch, acknowledge and inspect
/// jobs on named topics.
///
/// Implementations are shared (`Arc`) between every task of a client and
/// must be safe to call concurrently.
#[async_trait]
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// Stores a job; returns once the broker holds it as `options` demand.
    /// Options left unset take the backend's defaults.
    async fn add(&self, topic: &Topic, body: Bytes, options: &PushOptions) -> Result<JobId>;

    /// Takes up to `max` jobs from `topic`, waiting up to `wait` for the
    /// first one; an empty vector means none arrived in time.
    ///
    /// A fetched job belongs to the caller until it is acknowledged, given
    /// back with [`Backend::nack`], or its retry window passes. Dropping the
    /// returned future must not lose a job: a job the broker delivered to an
    /// abandoned fetch is redelivered after its retry window.
    async fn fetch(&self, topic: &Topic, max: usize, wait: Duration) -> Result<Vec<Job>>;

    /// Acknowledges a processed job: the broker forgets it everywhere.
    async fn ack(&self, id: &JobId) -> Result<()>;

    /// Acknowledges several processed jobs at once. Listeners call it with
    /// the jobs that finished at about the same time.
    ///
    /// An error means some of the jobs may not be acknowledged; the caller
    /// retries them one by one with [`Backend::ack`] (acknowledging a job
    /// twice is harmless). The default sends one [`Backend::ack`] per id,
    /// all concurrently; backends with a multi-id command (Disque
    /// `ACKJOB id..`) override it.
    async fn ack_many(&self, ids: &[JobId]) -> Result<()> {
        let acks = futures::future::join_all(ids.iter().map(|id| self.ack(id))).await;
        acks.into_iter().collect()
    }

    /// Gives a job back for redelivery at once; counts as a failed attempt.
    async fn nack(&self, id: &JobId) -> Result<()>;

    /// Puts a job that was fetched but never processed back in its queue at
    /// once, *without* counting a failed attempt. Listeners use it for jobs a
    /// fetch returned while they were stopping.
    ///
    /// The default calls [`Backend::nack`] (which does count an attempt);
    /// backends that can requeue without counting (Disque `ENQUEUE`)
    /// override it.
    async fn requeue(&self, id: &JobId) -> Result<()> {
        self.nack(id).await
    }

    /// Tells the broker a job is still being processed so it is not
    /// redelivered; returns how long the broker now waits before it would
    /// redeliver it (zero when the job is never redelivered).
    async fn working(&self, id: &JobId) -> Result<Duration>;

    /// Jobs waiting in `topic` across the whole broker (every node of a
    /// cluster), not counting jobs being processed.
    async fn queue_len(&self, topic: &Topic) -> Result<u64>;

    /// Up to `n` waiting jobs of `topic`, oldest first, without consuming
    /// them.
    async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>>;

    /// Closes every connection. Calls after `close` fail with
    /// [`Error::Shutdown`](crate::Error::Shutdown).
    async fn close(&self) -> Result<()>;
}

/// Optional ability: a claim that exactly one of many concurrent callers,
/// in any process, wins. Distributed cron uses it to run each tick once.
#[async_trait]
pub trait ExclusiveClaim: Backend {
    /// Tries to take the claim `key` for `hold`. Returns `true` for exactly
    /// one caller while the claim is held, `false` for every other caller.
    async fn try_claim(&self, key: &Topic, hold: Duration) -> Result<bool>;
}
