//! `NatsBackend`: the connection, the streams, the consumers, the tasks,
//! and the [`Backend`] impl.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::jetstream::{self, consumer::PullConsumer, kv, stream};
use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{
    Backend, Capabilities, Capability, Delivery, ExclusiveClaim, FanOut, Peek, QueueStats,
    ReplyChannel, Source,
};
use ezmq_core::{BrokerHealth, Error, JobId, PushOptions, Result, Topic};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::NatsConfig;
use crate::error::{self, NatsBackendError};
use crate::names::Names;
use crate::{connect_failure, mover, streams};

/// The NATS JetStream backend: every topic's jobs in one work-queue
/// stream (a subject per topic, a durable pull consumer per topic),
/// delayed jobs in a second stream until they are due, claims in a
/// key-value bucket (see the crate README for every guarantee).
///
/// Most code uses it through [`connect`](crate::connect); build it
/// directly to pass your own [`ClientConfig`](ezmq_core::ClientConfig):
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// use ezmq_core::{Client, ClientConfig};
/// use ezmq_nats::{NatsBackend, NatsConfig};
///
/// let backend = NatsBackend::connect(NatsConfig::new("nats://127.0.0.1:4222")).await?;
/// let client = Client::new(backend, ClientConfig::default().with_max_payload_bytes(512 << 10));
/// # let _ = client; Ok(()) }
/// ```
pub struct NatsBackend {
    pub(crate) inner: Arc<Inner>,
}

/// How long a topic's consumer lives with no pull and no lookup.
const QUEUE_CONSUMER_IDLE: Duration = Duration::from_secs(24 * 3600);

/// State shared by the backend, its tasks and every delivery handle.
pub(crate) struct Inner {
    pub(crate) config: NatsConfig,
    pub(crate) names: Names,
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    pub(crate) jobs: stream::Stream,
    pub(crate) broadcast: stream::Stream,
    pub(crate) claims: kv::Store,
    /// Pull consumers by name, created on first use.
    consumers: Mutex<HashMap<String, PullConsumer>>,
    closed: AtomicBool,
    cancel: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl fmt::Debug for NatsBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsBackend")
            .field("url", &self.inner.config.redacted_url())
            .field("prefix", &self.inner.config.prefix)
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl Drop for NatsBackend {
    // Stops the tasks when the backend is dropped without `close`.
    fn drop(&mut self) {
        self.inner.cancel.cancel();
    }
}

impl NatsBackend {
    /// Connects, then creates ezmq's streams and bucket where they are
    /// missing.
    ///
    /// Fails with [`Error::Connect`] naming the URL (password redacted)
    /// when no server answers, refuses the login or has no JetStream,
    /// and with [`Error::InvalidOption`] for a bad configuration.
    pub async fn connect(config: NatsConfig) -> Result<Self> {
        config.validate()?;
        let addr = config.redacted_url();
        let mut options = async_nats::ConnectOptions::new()
            .name("ezmq")
            .connection_timeout(config.connect_timeout)
            .request_timeout(Some(config.command_timeout))
            // Back within half a second of a server that restarts (the
            // client's default waits up to seconds between attempts).
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis(
                    u64::try_from(attempts)
                        .unwrap_or(u64::MAX)
                        .saturating_mul(50)
                        .min(500),
                )
            });
        if let Some((user, password)) = config.credentials() {
            options = options.user_and_password(user, password);
        }
        let servers = config
            .servers()
            .iter()
            .map(|s| format!("nats://{s}").parse::<async_nats::ServerAddr>())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|err| Error::invalid_option("url", format!("{addr}: {err}")))?;
        let client = match tokio::time::timeout(
            config.connect_timeout + Duration::from_secs(1),
            options.connect(servers),
        )
        .await
        {
            Ok(Ok(client)) => client,
            Ok(Err(err)) => return Err(connect_failure::connect_error(&config, addr, err).await),
            Err(_) => return Err(connect_failure::timed_out(&config, addr).await),
        };
        let js = jetstream::ContextBuilder::new()
            .timeout(config.command_timeout)
            .build(client.clone());
        let names = Names::new(&config.prefix);
        let jobs = streams::ensure(
            &js,
            &addr,
            stream::Config {
                name: names.jobs_stream.clone(),
                subjects: vec![names.jobs_subjects()],
                retention: stream::RetentionPolicy::WorkQueue,
                storage: stream::StorageType::File,
                num_replicas: config.replicas,
                duplicate_window: config.message_id_window,
                description: Some("ezmq jobs: a subject per topic".to_owned()),
                ..Default::default()
            },
        )
        .await?;
        let delayed = streams::ensure(
            &js,
            &addr,
            stream::Config {
                name: names.delayed_stream.clone(),
                subjects: vec![names.delayed_subjects()],
                retention: stream::RetentionPolicy::WorkQueue,
                storage: stream::StorageType::File,
                num_replicas: config.replicas,
                duplicate_window: config.message_id_window,
                description: Some(
                    "ezmq delayed jobs, moved to the jobs stream when due".to_owned(),
                ),
                ..Default::default()
            },
        )
        .await?;
        let broadcast = streams::ensure(
            &js,
            &addr,
            stream::Config {
                name: names.broadcast_stream.clone(),
                subjects: vec![names.broadcast_subjects()],
                retention: stream::RetentionPolicy::Interest,
                storage: stream::StorageType::File,
                num_replicas: config.replicas,
                description: Some("ezmq broadcasts: a durable consumer per group".to_owned()),
                ..Default::default()
            },
        )
        .await?;
        // The bucket's stream as the client's `create_key_value` makes it
        // (which first asks for account details a 2.9 server answers in a
        // shape this client does not read).
        streams::ensure(
            &js,
            &addr,
            stream::Config {
                name: format!("KV_{}", names.claims_bucket),
                description: Some("ezmq claims (cron ticks, unique keys, slots, lanes)".to_owned()),
                subjects: vec![format!("$KV.{}.>", names.claims_bucket)],
                max_messages_per_subject: 1,
                max_bytes: -1,
                max_message_size: -1,
                storage: stream::StorageType::File,
                allow_rollup: true,
                deny_delete: true,
                allow_direct: true,
                num_replicas: config.replicas,
                discard: stream::DiscardPolicy::New,
                duplicate_window: Duration::from_secs(120),
                ..Default::default()
            },
        )
        .await?;
        let claims = js
            .get_key_value(&names.claims_bucket)
            .await
            .map_err(|err| Error::connect(addr.clone(), err))?;
        let mover_consumer = mover::consumer(&delayed, &names)
            .await
            .map_err(|err| Error::connect(addr.clone(), err))?;
        let inner = Arc::new(Inner {
            names,
            client,
            js,
            jobs,
            broadcast,
            claims,
            consumers: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            cancel: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
            config,
        });
        let mover = tokio::spawn(mover::run(
            Arc::downgrade(&inner),
            mover_consumer,
            inner.cancel.clone(),
        ));
        inner
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(mover);
        tracing::info!(url = %addr, prefix = %inner.config.prefix, "connected to NATS JetStream");
        Ok(NatsBackend { inner })
    }

    /// The configuration in use.
    pub fn config(&self) -> &NatsConfig {
        &self.inner.config
    }

    /// The NATS client (ezmq's streams are named after
    /// [`NatsConfig::prefix`]).
    pub fn client(&self) -> &async_nats::Client {
        &self.inner.client
    }

    /// The stream every topic's jobs are stored in (`<prefix>_jobs`).
    pub fn jobs_stream(&self) -> &str {
        &self.inner.names.jobs_stream
    }

    /// The subject `topic`'s jobs are stored under in
    /// [`NatsBackend::jobs_stream`] (`<prefix>.jobs.<topic as a token>`:
    /// letters, digits and `-` kept, every other byte `_` and two hex
    /// digits).
    ///
    /// ```no_run
    /// # async fn demo() -> ezmq_core::Result<()> {
    /// use ezmq_nats::{NatsBackend, NatsConfig};
    ///
    /// let backend = NatsBackend::connect(NatsConfig::new("nats://127.0.0.1:4222")).await?;
    /// assert_eq!(backend.job_subject("orders.eu"), "ezmq.jobs.orders_2eeu");
    /// # Ok(()) }
    /// ```
    pub fn job_subject(&self, topic: &str) -> String {
        self.inner.names.job_subject(topic)
    }
}

impl Inner {
    pub(crate) fn ensure_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }

    /// Runs `call` within the command timeout.
    pub(crate) async fn timed<T, E>(
        &self,
        request: &'static str,
        call: impl Future<Output = std::result::Result<T, E>>,
    ) -> Result<T>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        self.ensure_open()?;
        match tokio::time::timeout(self.config.command_timeout, call).await {
            Ok(result) => result.map_err(error::request(request)),
            Err(_) => Err(NatsBackendError::NoReply {
                request,
                after: self.config.command_timeout,
            }
            .into()),
        }
    }

    /// The pull consumer of `source`, created on first use.
    pub(crate) async fn consumer(&self, source: &Source) -> Result<PullConsumer> {
        let (name, stream, config) = match source.group() {
            None => {
                let queue = crate::names::queue_of(source);
                let name = self.names.queue_consumer(queue);
                let config = jetstream::consumer::pull::Config {
                    durable_name: Some(name.clone()),
                    filter_subject: self.names.job_subject(queue),
                    ack_policy: jetstream::consumer::AckPolicy::Explicit,
                    ack_wait: self.config.lease,
                    max_deliver: -1,
                    max_ack_pending: -1,
                    // A topic nobody has read for a day loses its
                    // consumer, not its jobs (they stay in the stream and
                    // the next reader's new consumer starts at the first).
                    inactive_threshold: QUEUE_CONSUMER_IDLE,
                    ..Default::default()
                };
                (name, &self.jobs, config)
            }
            Some(group) => {
                let name = self.names.group_consumer(source.topic(), group);
                let config =
                    crate::fan_out::group_consumer_config(self, source.topic(), group, None);
                (name, &self.broadcast, config)
            }
        };
        if let Some(consumer) = self
            .consumers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&name)
        {
            return Ok(consumer.clone());
        }
        let consumer: PullConsumer = self
            .timed(
                "create consumer",
                crate::durable::consumer(stream, &name, config),
            )
            .await?;
        self.consumers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name, consumer.clone());
        Ok(consumer)
    }

    /// Forgets the cached consumer `name` (it was deleted, say).
    pub(crate) fn forget_consumer(&self, name: &str) {
        self.consumers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
    }

    async fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.cancel.cancel();
        let tasks: Vec<_> =
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            if let Err(err) = task.await {
                tracing::warn!(error = %err, "a nats backend task ended abnormally");
            }
        }
        if let Err(err) =
            tokio::time::timeout(self.config.command_timeout, self.client.flush()).await
        {
            tracing::debug!(error = %err, "flushing the NATS connection timed out");
        }
        if let Err(err) = self.client.drain().await {
            tracing::debug!(error = %err, "draining the NATS connection failed");
        }
        tracing::debug!("NATS backend closed");
        Ok(())
    }
}

#[async_trait]
impl Backend for NatsBackend {
    fn name(&self) -> &'static str {
        "nats"
    }

    /// Named one by one, never "all": a capability added to core later is
    /// not claimed before this backend implements it.
    fn abilities(&self) -> Capabilities {
        Capabilities::none()
            .with(Capability::DelayedDelivery)
            .with(Capability::LeaseExtension)
            .with(Capability::IdempotentPush)
            .with(Capability::RateLimitByKey)
    }

    async fn publish(&self, topic: &Topic, body: Bytes, options: &PushOptions) -> Result<JobId> {
        crate::push::publish(&self.inner, topic, body, options).await
    }

    /// Every job's publish is sent before the first acknowledgement is
    /// awaited (one flush, the acknowledgements awaited together).
    async fn publish_batch(
        &self,
        topic: &Topic,
        jobs: &[(Bytes, PushOptions)],
    ) -> Vec<Result<JobId>> {
        crate::push::publish_batch(&self.inner, topic, jobs).await
    }

    async fn receive(&self, source: &Source, max: usize, wait: Duration) -> Result<Vec<Delivery>> {
        crate::receive::receive(&self.inner, source, max, wait).await
    }

    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }

    /// The server's `INFO`, the connection's state and the JetStream
    /// account: see `health.rs`.
    async fn health(&self) -> Result<BrokerHealth> {
        crate::health::report(&self.inner).await
    }

    fn queue_stats(&self) -> Option<&dyn QueueStats> {
        Some(self)
    }

    fn peek(&self) -> Option<&dyn Peek> {
        Some(self)
    }

    fn exclusive_claim(&self) -> Option<&dyn ExclusiveClaim> {
        Some(self)
    }

    fn fan_out(&self) -> Option<&dyn FanOut> {
        Some(self)
    }

    fn reply_channel(&self) -> Option<&dyn ReplyChannel> {
        Some(self)
    }
}
