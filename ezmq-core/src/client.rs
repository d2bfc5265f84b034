//! `Client`: the one [`MqClient`] implementation, whatever the broker.

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
use crate::mq_client::MqClient;
use crate::push_options::PushOptions;
use crate::spi::{Backend, Capabilities, Runtime, Source};
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

/// An ezmq client, whatever the broker behind it. Cheap to clone: clones
/// share the connections, listeners and shutdown.
///
/// Get one from `ezmq::connect_url` (or a backend crate's `connect`).
/// Feature crates (cron, broadcast, request-reply) add methods through
/// extension traits that work on any [`MqClient`].
#[derive(Clone)]
pub struct Client {
    runtime: Arc<Runtime>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("runtime", &self.runtime)
            .finish()
    }
}

impl Client {
    /// Wraps a connected backend.
    pub fn new(backend: impl Backend, config: ClientConfig) -> Self {
        Self::from_backend(Arc::new(backend), config)
    }

    /// Wraps a connected, shared backend.
    pub fn from_backend(backend: Arc<dyn Backend>, config: ClientConfig) -> Self {
        Client {
            runtime: Arc::new(Runtime::new(backend, config)),
        }
    }
}

#[async_trait]
impl MqClient for Client {
    // The hot path, without the default's `push_with` hop (one boxed future
    // less per push) and with nothing to validate in the default options.
    async fn push(&self, topic: &str, body: Bytes) -> Result<JobId> {
        let topic = Topic::new(topic)?;
        self.runtime.ensure_open()?;
        self.runtime.check_payload(&body)?;
        let (telemetry, backend) = (self.runtime.telemetry(), &**self.runtime.backend());
        crate::producer::publish(telemetry, backend, &topic, body, PushOptions::default()).await
    }

    async fn push_with(&self, topic: &str, body: Bytes, options: PushOptions) -> Result<JobId> {
        let topic = Topic::new(topic)?;
        self.runtime.publish_owned(&topic, body, options).await
    }

    async fn push_batch(
        &self,
        topic: &str,
        jobs: Vec<(Bytes, PushOptions)>,
    ) -> Result<Vec<Result<JobId>>> {
        let topic = Topic::new(topic)?;
        self.runtime.publish_batch(&topic, jobs).await
    }

    async fn add_listener(
        &self,
        topic: &str,
        handler: Arc<dyn Handler>,
        options: ConsumeOptions,
    ) -> Result<ListenerHandle> {
        let topic = Topic::new(topic)?;
        self.runtime.listen(Source::Topic(topic), handler, options)
    }

    async fn queue_len(&self, topic: &str) -> Result<u64> {
        let topic = Topic::new(topic)?;
        self.admin().queue_len(&topic).await
    }

    async fn peek(&self, topic: &str, n: usize) -> Result<Vec<Job>> {
        let topic = Topic::new(topic)?;
        self.admin().peek(&topic, n).await
    }

    fn backend_name(&self) -> &'static str {
        self.runtime.backend().name()
    }

    fn capabilities(&self) -> Capabilities {
        self.runtime.backend().capabilities()
    }

    async fn shutdown(&self, grace: Duration) -> Result<()> {
        self.runtime.shutdown(grace).await
    }

    fn runtime(&self) -> &Runtime {
        &self.runtime
    }
}
