//! `Client`: the [`MqClient`] implementation shared by every backend.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::backend::Backend;
use crate::consume_options::ConsumeOptions;
use crate::error::{Error, Result};
use crate::extensions::Extensions;
use crate::handler::Handler;
use crate::job::{Job, JobId};
use crate::listener::{self, ListenerHandle};
use crate::mq_client::MqClient;
use crate::push_options::PushOptions;
use crate::topic::Topic;

/// Settings of a [`Client`] that do not depend on the backend.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Largest body a push accepts, in bytes. Default 1 MiB.
    pub max_payload_bytes: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            max_payload_bytes: 1024 * 1024,
        }
    }
}

impl ClientConfig {
    /// Sets [`ClientConfig::max_payload_bytes`].
    #[must_use]
    pub fn with_max_payload_bytes(mut self, max: usize) -> Self {
        self.max_payload_bytes = max;
        self
    }
}

/// An ezmq client over backend `B`. Cheap to clone: clones share the
/// connections, listeners and shutdown.
///
/// Backend crates give a constructor (for Disque,
/// `ezmq_disque::DisqueClient::connect`). Feature crates (cron, broadcast,
/// request-reply) add methods through extension traits.
pub struct Client<B: Backend> {
    inner: Arc<Inner<B>>,
}

struct Inner<B: Backend> {
    backend: Arc<B>,
    config: ClientConfig,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    closed: AtomicBool,
    extensions: Extensions,
    listeners: listener::Registry,
}

impl<B: Backend> Drop for Inner<B> {
    // The last clone gone: stop every background task.
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl<B: Backend> Clone for Client<B> {
    fn clone(&self) -> Self {
        Client {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<B: Backend> fmt::Debug for Client<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("backend", &self.inner.backend)
            .field("config", &self.inner.config)
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl<B: Backend> Client<B> {
    /// Wraps a connected backend.
    pub fn new(backend: B, config: ClientConfig) -> Self {
        Client {
            inner: Arc::new(Inner {
                backend: Arc::new(backend),
                config,
                shutdown: CancellationToken::new(),
                tasks: TaskTracker::new(),
                closed: AtomicBool::new(false),
                extensions: Extensions::default(),
                listeners: listener::Registry::default(),
            }),
        }
    }

    /// The backend, for feature crates that need its optional abilities.
    pub fn backend(&self) -> &Arc<B> {
        &self.inner.backend
    }

    /// Per-client state of a feature crate: the value of type `T` (one per
    /// type and client, shared by the client's clones), created by `init` on
    /// first use.
    pub fn extension<T, F>(&self, init: F) -> Arc<T>
    where
        T: std::any::Any + Send + Sync,
        F: FnOnce() -> T,
    {
        self.inner.extensions.get_or_init(init)
    }

    /// The client's settings.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// A token cancelled when the client shuts down (or its last clone is
    /// dropped). Background work of feature crates selects on it.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.child_token()
    }

    /// True once [`MqClient::shutdown`] has started.
    pub fn is_shut_down(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// Spawns a background task owned by the client: shutdown waits for it
    /// (it should watch [`Client::shutdown_token`]).
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner.tasks.spawn(task)
    }

    /// Fails with [`Error::Shutdown`] once shutdown has started.
    pub fn ensure_open(&self) -> Result<()> {
        if self.is_shut_down() {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }

    /// Checks a body against [`ClientConfig::max_payload_bytes`].
    pub fn check_payload(&self, body: &[u8]) -> Result<()> {
        let max = self.inner.config.max_payload_bytes;
        if body.len() > max {
            return Err(Error::PayloadTooLarge {
                size: body.len(),
                max,
            });
        }
        Ok(())
    }

    /// Pushes to an already validated (possibly internal) topic. Feature
    /// crates use this for their internal queues.
    pub async fn push_to(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<JobId> {
        self.ensure_open()?;
        self.check_payload(&body)?;
        options.validate()?;
        self.inner.backend.add(topic, body, options).await
    }

    /// Starts a listener on an already validated (possibly internal) topic.
    ///
    /// The listener belongs to the client: it runs until
    /// [`ListenerHandle::stop`] or [`MqClient::shutdown`], whatever happens
    /// to the handle. Fails on invalid options, including a dead-letter topic
    /// that is not a valid name (`<topic>.dead-letter` too long, for one).
    ///
    /// # Panics
    ///
    /// When called outside a Tokio runtime.
    pub fn listen_to(
        &self,
        topic: Topic,
        handler: Arc<dyn Handler>,
        options: ConsumeOptions,
    ) -> Result<ListenerHandle> {
        self.ensure_open()?;
        options.validate()?;
        listener::start(self, &self.inner.listeners, topic, handler, options)
    }
}

#[async_trait]
impl<B: Backend> MqClient for Client<B> {
    // The hot path, without the default's `push_with` hop (one boxed future
    // less per push) and with nothing to validate in the default options.
    async fn push(&self, topic: &str, body: Bytes) -> Result<JobId> {
        let topic = Topic::new(topic)?;
        self.ensure_open()?;
        self.check_payload(&body)?;
        self.inner
            .backend
            .add(&topic, body, &PushOptions::default())
            .await
    }

    async fn push_with(&self, topic: &str, body: Bytes, options: PushOptions) -> Result<JobId> {
        let topic = Topic::new(topic)?;
        self.push_to(&topic, body, &options).await
    }

    async fn add_listener(
        &self,
        topic: &str,
        handler: Arc<dyn Handler>,
        options: ConsumeOptions,
    ) -> Result<ListenerHandle> {
        let topic = Topic::new(topic)?;
        self.listen_to(topic, handler, options)
    }

    async fn queue_len(&self, topic: &str) -> Result<u64> {
        let topic = Topic::new(topic)?;
        self.ensure_open()?;
        self.inner.backend.queue_len(&topic).await
    }

    async fn peek(&self, topic: &str, n: usize) -> Result<Vec<Job>> {
        let topic = Topic::new(topic)?;
        self.ensure_open()?;
        self.inner.backend.peek(&topic, n).await
    }

    async fn shutdown(&self, grace: Duration) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Err(Error::Shutdown);
        }
        // Listeners first get the grace period, then the token stops them
        // (and every other background task) from starting new work.
        let longest_fetch = self.inner.listeners.stop_all(grace);
        self.inner.shutdown.cancel();
        self.inner.tasks.close();
        // A listener drains within max(fetch in flight, grace), then NACKs
        // what it aborted; the extra second covers those NACKs.
        let wait = grace
            .max(longest_fetch)
            .saturating_add(Duration::from_secs(1));
        if tokio::time::timeout(wait, self.inner.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                ?grace,
                "background tasks still running after the grace period"
            );
        }
        self.inner.backend.close().await
    }
}
