//! The `MqClient` trait: the object-safe API every ezmq client offers.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::consume_options::ConsumeOptions;
use crate::error::Result;
use crate::handler::Handler;
use crate::job::{Job, JobId};
use crate::listener::ListenerHandle;
use crate::push_options::PushOptions;

/// A messaging client: push jobs, consume them with listeners, inspect
/// queues, shut down.
///
/// Object safe, so services can hold an `Arc<dyn MqClient>`. Typed and
/// closure-based conveniences live in [`MqClientExt`](crate::MqClientExt).
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
    /// Pushes a job with the client's default options.
    async fn push(&self, topic: &str, body: Bytes) -> Result<JobId> {
        self.push_with(topic, body, PushOptions::default()).await
    }

    /// Pushes a job that becomes deliverable after `delay` (never earlier).
    async fn push_delay(&self, topic: &str, body: Bytes, delay: Duration) -> Result<JobId> {
        self.push_with(topic, body, PushOptions::default().with_delay(delay))
            .await
    }

    /// Pushes a job with explicit options.
    async fn push_with(&self, topic: &str, body: Bytes, options: PushOptions) -> Result<JobId>;

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

    /// Jobs waiting in `topic` (across the whole cluster).
    async fn queue_len(&self, topic: &str) -> Result<u64>;

    /// Up to `n` waiting jobs of `topic`, oldest first, without consuming
    /// them.
    async fn peek(&self, topic: &str, n: usize) -> Result<Vec<Job>>;

    /// Stops every listener: no new fetches, in-flight handlers get `grace`
    /// to finish; jobs not finished by then are given back to the broker.
    /// Then closes the connections. Later calls fail with
    /// [`Error::Shutdown`](crate::Error::Shutdown).
    async fn shutdown(&self, grace: Duration) -> Result<()>;
}
