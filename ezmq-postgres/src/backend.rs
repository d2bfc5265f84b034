//! `PostgresBackend`: the pool, the schema's statements, the tasks, and
//! the [`Backend`] impl.

use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{
    Backend, Capabilities, Capability, Delivery, DeliveryHandle, ExclusiveClaim, FanOut, JobStore,
    Peek, QueueStats, ReplyChannel, Source,
};
use ezmq_core::{BrokerHealth, Error, JobId, PushOptions, Result, Topic};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};
use sqlx::{Connection, PgPool};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::PostgresConfig;
use crate::error::{self, PostgresBackendError};
use crate::sql::Sql;
use crate::wake::{self, Wakes};
use crate::{connect_failure, schema, sweep};

/// The PostgreSQL backend: jobs are rows of one table in the
/// configuration's schema, fetched with `FOR UPDATE SKIP LOCKED`, and
/// waiting listeners are woken by `LISTEN`/`NOTIFY` (see the crate README
/// for every guarantee).
///
/// Most code uses it through [`connect`](crate::connect); build it
/// directly to pass your own [`ClientConfig`](ezmq_core::ClientConfig):
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// use ezmq_core::{Client, ClientConfig};
/// use ezmq_postgres::{PostgresBackend, PostgresConfig};
///
/// let backend = PostgresBackend::connect(PostgresConfig::new("postgres://127.0.0.1/app")).await?;
/// let client = Client::new(backend, ClientConfig::default().with_max_payload_bytes(4 << 20));
/// # let _ = client; Ok(()) }
/// ```
pub struct PostgresBackend {
    pub(crate) inner: Arc<Inner>,
}

/// State shared by the backend, its tasks and every delivery handle.
pub(crate) struct Inner {
    pub(crate) config: PostgresConfig,
    pub(crate) sql: Sql,
    pub(crate) pool: PgPool,
    pub(crate) wakes: Arc<Wakes>,
    /// This instance's name as a broadcast-group member.
    pub(crate) member: String,
    closed: AtomicBool,
    cancel: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresBackend")
            .field("url", &self.inner.config.redacted_url())
            .field("schema", &self.inner.config.schema)
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl Drop for PostgresBackend {
    // Stops the tasks when the backend is dropped without `close`.
    fn drop(&mut self) {
        self.inner.cancel.cancel();
    }
}

impl PostgresBackend {
    /// Connects, then creates or migrates the schema.
    ///
    /// Fails with [`Error::Connect`] naming the URL (password redacted)
    /// when PostgreSQL does not answer or refuses the login or database,
    /// and with [`Error::InvalidOption`] for a bad configuration.
    pub async fn connect(config: PostgresConfig) -> Result<Self> {
        config.validate()?;
        let addr = config.redacted_url();
        let options = PgConnectOptions::from_str(&config.url)
            .map_err(|err| Error::invalid_option("url", format!("{addr}: {err}")))?
            .application_name("ezmq");
        // One connection first, alone: the pool would retry a refused or
        // failed login until its timeout and report only that.
        let probe = match tokio::time::timeout(
            config.connect_timeout,
            PgConnection::connect_with(&options),
        )
        .await
        {
            Ok(Ok(probe)) => probe,
            Ok(Err(err)) => {
                return Err(connect_failure::connect_error(&config.url, addr, err).await)
            }
            Err(_) => {
                return Err(
                    connect_failure::timed_out(&config.url, addr, config.connect_timeout).await,
                )
            }
        };
        if let Err(err) = probe.close().await {
            tracing::debug!(error = %err, "closing the first connection failed");
        }
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections)
            .acquire_timeout(config.command_timeout)
            .connect_lazy_with(options);
        let version = schema::migrate(&pool, &config.schema).await?;
        let inner = Arc::new(Inner {
            sql: Sql::new(&config.schema),
            pool,
            wakes: Arc::new(Wakes::default()),
            member: uuid::Uuid::new_v4().simple().to_string(),
            closed: AtomicBool::new(false),
            cancel: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
            config,
        });
        let listen = tokio::spawn(wake::listen(
            inner.pool.clone(),
            inner.sql.channel.clone(),
            Arc::clone(&inner.wakes),
            inner.cancel.clone(),
        ));
        let sweeper = tokio::spawn(sweep::run(Arc::downgrade(&inner), inner.cancel.clone()));
        inner
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend([listen, sweeper]);
        tracing::info!(url = %addr, schema = %inner.config.schema, schema_version = version, "connected to PostgreSQL");
        Ok(PostgresBackend { inner })
    }

    /// The configuration in use.
    pub fn config(&self) -> &PostgresConfig {
        &self.inner.config
    }

    /// The connection pool (the schema's tables are in
    /// [`PostgresConfig::schema`]).
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }
}

/// `d` in whole milliseconds, rounded up, as PostgreSQL's `bigint`.
pub(crate) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_micros().div_ceil(1000)).unwrap_or(i64::MAX)
}

impl Inner {
    pub(crate) fn ensure_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }

    /// Runs `query` within the command timeout.
    pub(crate) async fn timed<T>(
        &self,
        statement: &'static str,
        query: impl Future<Output = std::result::Result<T, sqlx::Error>>,
    ) -> Result<T> {
        self.ensure_open()?;
        match tokio::time::timeout(self.config.command_timeout, query).await {
            Ok(result) => result.map_err(error::statement(statement)),
            Err(_) => Err(PostgresBackendError::NoReply {
                statement,
                after: self.config.command_timeout,
            }
            .into()),
        }
    }

    /// [`Inner::timed`] for a push to `topic`: a statement that may have
    /// run without an answer is [`Error::OutcomeUnknown`].
    pub(crate) async fn timed_push<T>(
        &self,
        topic: &Topic,
        query: impl Future<Output = std::result::Result<T, sqlx::Error>>,
    ) -> Result<T> {
        self.ensure_open()?;
        match tokio::time::timeout(self.config.command_timeout, query).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(source)) if error::is_unanswered(&source) => Err(Error::outcome_unknown(
                topic.as_str(),
                PostgresBackendError::Statement {
                    statement: "push",
                    source,
                },
            )),
            Ok(Err(source)) => Err(error::statement("push")(source)),
            Err(_) => Err(Error::outcome_unknown(
                topic.as_str(),
                PostgresBackendError::NoReply {
                    statement: "push",
                    after: self.config.command_timeout,
                },
            )),
        }
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
                tracing::warn!(error = %err, "a postgres backend task ended abnormally");
            }
        }
        self.pool.close().await;
        tracing::debug!("PostgreSQL backend closed");
        Ok(())
    }
}

#[async_trait]
impl Backend for PostgresBackend {
    fn name(&self) -> &'static str {
        "postgres"
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

    /// One `INSERT … SELECT FROM unnest(…)` for the jobs without a
    /// message id (one round trip, one notification); jobs with one take
    /// the deduplicating path, concurrently.
    async fn publish_batch(
        &self,
        topic: &Topic,
        jobs: &[(Bytes, PushOptions)],
    ) -> Vec<Result<JobId>> {
        self.inner.publish_batch(topic, jobs).await
    }

    async fn receive(&self, source: &Source, max: usize, wait: Duration) -> Result<Vec<Delivery>> {
        crate::receive::receive(&self.inner, source, max, wait).await
    }

    async fn ack_batch(&self, handles: &[DeliveryHandle]) -> Result<()> {
        crate::settle::ack_batch(&self.inner, handles).await
    }

    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }

    /// One query of the server's version, role, uptime and sizes: see
    /// `health.rs`.
    async fn health(&self) -> Result<BrokerHealth> {
        crate::health::report(&self.inner).await
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
}
