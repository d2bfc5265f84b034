//! `RedisBackend`: connections, shared state and the [`Backend`] impl.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{
    Backend, Capabilities, Capability, Delivery, DeliveryHandle, ExclusiveClaim, FanOut, JobStore,
    Peek, QueueStats, RateLimiter, ReplyChannel, Source,
};
use ezmq_core::{BrokerHealth, Error, JobId, PushOptions, Result, Topic};
use redis::{Cmd, RedisError, Value};
use tokio_util::sync::CancellationToken;

use crate::config::RedisConfig;
use crate::conn::{Conn, Connector, Pool, BLOCK_MARGIN};
use crate::error::{self, RedisBackendError};
use crate::handshake;
use crate::source::SourceState;

/// The Redis Streams backend (single server or Redis Cluster).
///
/// * Ordinary commands share one multiplexed connection (on a single
///   server the backend's own, made again on the first command after it
///   died, see `live.rs`; on a cluster a cluster connection that follows
///   the slot map).
/// * Blocking reads (`XREADGROUP BLOCK`, `BLPOP`) each take a dedicated
///   connection from a small pool, so they never stall other commands.
/// * Each topic is a stream `<prefix>:{<topic>}:s` read by the consumer
///   group `ezmq`, with its delayed messages in the sorted set
///   `<prefix>:{<topic>}:d`; see the crate README for every guarantee.
///
/// Most code uses it through [`connect`](crate::connect); build it
/// directly to pass your own [`ClientConfig`](ezmq_core::ClientConfig):
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// use ezmq_core::{Client, ClientConfig};
/// use ezmq_redis::{RedisBackend, RedisConfig};
///
/// let backend = RedisBackend::connect(RedisConfig::new("redis://127.0.0.1:6379")).await?;
/// let client = Client::new(backend, ClientConfig::default().with_max_payload_bytes(4 << 20));
/// # let _ = client; Ok(()) }
/// ```
pub struct RedisBackend {
    pub(crate) inner: Arc<Inner>,
}

/// State shared by the backend and every delivery handle it gave out.
pub(crate) struct Inner {
    pub(crate) config: RedisConfig,
    /// This instance's consumer name in every consumer group.
    pub(crate) consumer: String,
    connector: Connector,
    shared: Conn,
    pool: Pool,
    closed: AtomicBool,
    cancel: CancellationToken,
    sources: Mutex<HashMap<Source, Arc<SourceState>>>,
    /// Broadcast groups this instance joined, with their retention.
    pub(crate) joined: Mutex<HashMap<(Topic, Topic), Duration>>,
}

impl fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackend")
            .field("urls", &self.inner.config.redacted_urls())
            .field("cluster", &self.inner.config.cluster)
            .field("consumer", &self.inner.consumer)
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl Drop for RedisBackend {
    // Aborts blocking reads still in flight when the backend is dropped
    // without `close`.
    fn drop(&mut self) {
        self.inner.cancel.cancel();
    }
}

impl RedisBackend {
    /// Connects to the server (or the cluster's seed nodes).
    ///
    /// Fails with [`Error::Connect`] naming the URLs (passwords redacted)
    /// when Redis does not answer or refuses the password, and with
    /// [`Error::InvalidOption`] for a bad configuration or a URL this
    /// build cannot use.
    pub async fn connect(config: RedisConfig) -> Result<Self> {
        config.validate()?;
        // Passwords redacted: errors and logs never show them.
        let addrs = config.redacted_urls();
        // Nothing is connected yet: a failure is a URL this build cannot
        // use (say `rediss://` without TLS support).
        let connector = Connector::new(&config)
            .map_err(|err| Error::invalid_option("urls", format!("{addrs}: {err}")))?;
        let mut shared = match connector.shared(&config).await {
            Ok(shared) => shared,
            Err(err) => return Err(handshake::connect_failed(&config, &addrs, err).await),
        };
        handshake::check_server(&mut shared, &config, &addrs).await?;
        let consumer = config
            .consumer_name
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        tracing::info!(urls = %addrs, cluster = config.cluster, %consumer, "connected to Redis");
        Ok(RedisBackend {
            inner: Arc::new(Inner {
                config,
                consumer,
                connector,
                shared,
                pool: Pool::default(),
                closed: AtomicBool::new(false),
                cancel: CancellationToken::new(),
                sources: Mutex::new(HashMap::new()),
                joined: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &RedisConfig {
        &self.inner.config
    }

    /// This instance's consumer name in the consumer groups.
    pub fn consumer_name(&self) -> &str {
        &self.inner.consumer
    }
}

/// Unix time in milliseconds by this machine's clock.
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `d` in whole milliseconds, rounded up.
pub(crate) fn ms_ceil(d: Duration) -> u64 {
    u64::try_from(d.as_micros().div_ceil(1000)).unwrap_or(u64::MAX)
}

impl Inner {
    pub(crate) fn ensure_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }

    /// The shared connection (cheap clone of a multiplexed handle).
    pub(crate) fn conn(&self) -> Conn {
        self.shared.clone()
    }

    /// The state of `source`, created on first use.
    pub(crate) fn source_state(&self, source: &Source) -> Arc<SourceState> {
        let mut sources = self
            .sources
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(state) = sources.get(source) {
            return Arc::clone(state);
        }
        let state = Arc::new(SourceState::new(&self.config.key_prefix, source));
        sources.insert(source.clone(), Arc::clone(&state));
        state
    }

    /// The state of a source only if it exists (publishers notify it of
    /// delayed messages).
    pub(crate) fn existing_state(&self, source: &Source) -> Option<Arc<SourceState>> {
        self.sources.lock().ok()?.get(source).cloned()
    }

    /// Runs a blocking `cmd` that may wait up to `block` on a dedicated
    /// connection. The connection goes back to the pool unless the command
    /// failed on the wire, timed out or was cancelled by `close`.
    pub(crate) async fn blocking(
        &self,
        name: &'static str,
        cmd: &Cmd,
        block: Duration,
    ) -> Result<std::result::Result<Value, RedisError>> {
        let mut conn = match self.pool.take() {
            Some(conn) => conn,
            None => self
                .connector
                .dedicated(&self.config)
                .await
                .map_err(error::command(name))?,
        };
        let limit = block + BLOCK_MARGIN;
        let result = tokio::select! {
            result = tokio::time::timeout(limit, cmd.query_async::<Value>(&mut conn)) => result,
            () = self.cancel.cancelled() => return Err(Error::Shutdown),
        };
        match result {
            Err(_) => Err(RedisBackendError::NoReply {
                command: name,
                after: limit,
            }
            .into()),
            Ok(Ok(value)) => {
                self.pool.put(conn);
                Ok(Ok(value))
            }
            Ok(Err(err)) => {
                if !(err.is_io_error() || err.is_connection_dropped() || err.is_timeout()) {
                    self.pool.put(conn);
                }
                Ok(Err(err))
            }
        }
    }

    /// `WAIT` after a write when [`RedisConfig::wait_replicas`] is set.
    /// Sent with a read of `key` so that on a cluster it goes to the node
    /// that took the write, over the same connection.
    pub(crate) async fn wait_replicas(&self, key: &str) -> Result<()> {
        self.replicated(key).await.map_err(Into::into)
    }

    /// [`wait_replicas`](Self::wait_replicas) with the backend's own error
    /// (a batch gives each of its jobs a copy).
    pub(crate) async fn replicated(&self, key: &str) -> std::result::Result<(), RedisBackendError> {
        let Some((replicas, timeout)) = self.config.wait_replicas else {
            return Ok(());
        };
        let mut pipe = redis::pipe();
        pipe.cmd("EXISTS")
            .arg(key)
            .ignore()
            .cmd("WAIT")
            .arg(replicas)
            .arg(ms_ceil(timeout));
        let (reached,): (i64,) = pipe.query_async(&mut self.conn()).await.map_err(|source| {
            RedisBackendError::Command {
                command: "WAIT",
                source,
            }
        })?;
        if reached < i64::from(replicas) {
            return Err(RedisBackendError::TooFewReplicas {
                reached,
                wanted: replicas,
                timeout,
            });
        }
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.cancel.cancel();
        self.pool.clear();
        self.shared.close();
        tracing::debug!("Redis backend closed");
        Ok(())
    }
}

#[async_trait]
impl Backend for RedisBackend {
    fn name(&self) -> &'static str {
        "redis"
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
        self.inner.publish(topic, body, options).await
    }

    /// Immediate and delayed jobs in one pipeline (one round trip); jobs
    /// with a producer-chosen message id through the message-id script, at
    /// the same time (see the crate README).
    async fn publish_batch(
        &self,
        topic: &Topic,
        jobs: &[(Bytes, PushOptions)],
    ) -> Vec<Result<JobId>> {
        self.inner.publish_batch(topic, jobs).await
    }

    async fn receive(&self, source: &Source, max: usize, wait: Duration) -> Result<Vec<Delivery>> {
        self.inner.receive(source, max, wait).await
    }

    async fn ack_batch(&self, handles: &[DeliveryHandle]) -> Result<()> {
        crate::settle::ack_batch(&self.inner, handles).await
    }

    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }

    /// `INFO` (on a cluster also `CLUSTER NODES`): see `health.rs`.
    async fn health(&self) -> Result<BrokerHealth> {
        self.inner.health().await
    }

    fn queue_stats(&self) -> Option<&dyn QueueStats> {
        Some(self)
    }

    fn peek(&self) -> Option<&dyn Peek> {
        Some(self)
    }

    fn job_store(&self) -> Option<&dyn JobStore> {
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

    fn rate_limiter(&self) -> Option<&dyn RateLimiter> {
        Some(self)
    }
}
