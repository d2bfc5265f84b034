//! The `MqClient` trait: the object-safe API every ezmq client offers.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::admin::Admin;
use crate::consume_options::ConsumeOptions;
use crate::error::Result;
use crate::handler::Handler;
use crate::job::{Job, JobId};
use crate::listener::ListenerHandle;
use crate::push_options::PushOptions;
use crate::spi::{Capabilities, Runtime};

/// A messaging client: push jobs, consume them with listeners, inspect
/// queues, shut down — the same on every broker.
///
/// Object safe, so services can hold an `Arc<dyn MqClient>`; cron,
/// broadcast and request-reply work on it too. Typed and closure-based
/// conveniences live in [`MqClientExt`](crate::MqClientExt).
///
/// ```no_run
/// # async fn demo(client: std::sync::Arc<dyn ezmq_core::MqClient>) -> ezmq_core::Result<()> {
/// use std::time::Duration;
///
/// let id = client.push("emails", "hello".into()).await?;
/// client.push_delay("emails", "later".into(), Duration::from_secs(30)).await?;
/// println!("queued {id}, {} waiting", client.queue_len("emails").await?);
/// # Ok(()) }
/// ```
#[async_trait]
pub trait MqClient: Send + Sync + fmt::Debug {
    /// Pushes a job with the default options.
    async fn push(&self, topic: &str, body: Bytes) -> Result<JobId> {
        self.push_with(topic, body, PushOptions::default()).await
    }

    /// Pushes a job that becomes deliverable after `delay` (never earlier).
    /// Fails with [`Error::Unsupported`](crate::Error::Unsupported) on a
    /// backend without delayed delivery.
    async fn push_delay(&self, topic: &str, body: Bytes, delay: Duration) -> Result<JobId> {
        self.push_with(topic, body, PushOptions::default().with_delay(delay))
            .await
    }

    /// Pushes a job with explicit options (delay, ttl, headers, id).
    async fn push_with(&self, topic: &str, body: Bytes, options: PushOptions) -> Result<JobId>;

    /// Pushes several jobs to `topic` at once (one round trip, or a few,
    /// where the broker can pipeline them): each job's id or error, in
    /// order. Fails as a whole, sending nothing, when one job cannot work
    /// ([`Error::BatchRejected`](crate::Error::BatchRejected)) or the
    /// client is shut down. A job whose entry is an error may or may not be
    /// stored (as for [`MqClient::push_with`]); the others are.
    ///
    /// ```no_run
    /// # async fn demo(client: &dyn ezmq_core::MqClient) -> ezmq_core::Result<()> {
    /// use ezmq_core::PushOptions;
    ///
    /// let jobs = (0..50).map(|n| (n.to_string().into(), PushOptions::new())).collect();
    /// for result in client.push_batch("emails", jobs).await? {
    ///     let id = result?;
    ///     println!("queued {id}");
    /// }
    /// # Ok(()) }
    /// ```
    async fn push_batch(
        &self,
        topic: &str,
        jobs: Vec<(Bytes, PushOptions)>,
    ) -> Result<Vec<Result<JobId>>>;

    /// Starts a listener that runs `handler` for every job of `topic`.
    ///
    /// Success acknowledges the job; an error or a panic gives it back for a
    /// retry with backoff, up to `options.max_attempts`, then it goes to the
    /// dead-letter topic.
    async fn add_listener(
        &self,
        topic: &str,
        handler: Arc<dyn Handler>,
        options: ConsumeOptions,
    ) -> Result<ListenerHandle>;

    /// Jobs waiting in `topic` (across the whole cluster), not counting
    /// the ones being processed. Fails with
    /// [`Error::Unsupported`](crate::Error::Unsupported) on a backend
    /// without queue stats.
    async fn queue_len(&self, topic: &str) -> Result<u64>;

    /// Up to `n` waiting jobs of `topic`, oldest first, without consuming
    /// them. Fails with [`Error::Unsupported`](crate::Error::Unsupported)
    /// on a backend that cannot peek.
    async fn peek(&self, topic: &str, n: usize) -> Result<Vec<Job>>;

    /// The broker's name: `disque`, `redis`, `rabbitmq`.
    fn backend_name(&self) -> &'static str;

    /// What the broker can do beyond push and consume.
    fn capabilities(&self) -> Capabilities;

    /// Inspection and maintenance for tools (the command line, a
    /// dashboard): queue lengths, peeking, groups, this client's
    /// listeners, taking jobs off a topic.
    fn admin(&self) -> Admin<'_> {
        Admin::new(self.runtime())
    }

    /// Stops every listener: no new fetches, in-flight handlers get `grace`
    /// to finish; jobs not finished by then are given back to the broker.
    /// Waits for every background task, then closes the connections. Later
    /// calls fail with [`Error::Shutdown`](crate::Error::Shutdown).
    async fn shutdown(&self, grace: Duration) -> Result<()>;

    /// The client's runtime, for feature crates (cron, broadcast,
    /// request-reply) — the SPI's side of the client. Applications and
    /// tools use [`MqClient::admin`] instead.
    #[doc(hidden)]
    fn runtime(&self) -> &Runtime;
}

#[async_trait]
impl<T: MqClient + ?Sized> MqClient for Arc<T> {
    async fn push(&self, topic: &str, body: Bytes) -> Result<JobId> {
        (**self).push(topic, body).await
    }

    async fn push_delay(&self, topic: &str, body: Bytes, delay: Duration) -> Result<JobId> {
        (**self).push_delay(topic, body, delay).await
    }

    async fn push_with(&self, topic: &str, body: Bytes, options: PushOptions) -> Result<JobId> {
        (**self).push_with(topic, body, options).await
    }

    async fn push_batch(
        &self,
        topic: &str,
        jobs: Vec<(Bytes, PushOptions)>,
    ) -> Result<Vec<Result<JobId>>> {
        (**self).push_batch(topic, jobs).await
    }

    async fn add_listener(
        &self,
        topic: &str,
        handler: Arc<dyn Handler>,
        options: ConsumeOptions,
    ) -> Result<ListenerHandle> {
        (**self).add_listener(topic, handler, options).await
    }

    async fn queue_len(&self, topic: &str) -> Result<u64> {
        (**self).queue_len(topic).await
    }

    async fn peek(&self, topic: &str, n: usize) -> Result<Vec<Job>> {
        (**self).peek(topic, n).await
    }

    fn backend_name(&self) -> &'static str {
        (**self).backend_name()
    }

    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }

    async fn shutdown(&self, grace: Duration) -> Result<()> {
        (**self).shutdown(grace).await
    }

    fn runtime(&self) -> &Runtime {
        (**self).runtime()
    }
}
