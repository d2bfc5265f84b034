//! Single-server connections whose death is known before a command is
//! sent on them: each one's driver task is this backend's own, and it
//! marks the connection dead when it ends (server gone, socket closed).
//!
//! The shared connection is made again on first use after it died, one
//! attempt at a time and with no delay of its own: callers pace their
//! retries (the listener's fetch-error backoff), so a listener resumes as
//! soon as Redis accepts connections again. An error while getting the
//! connection means nothing was sent, which lets a push tell "never sent"
//! from "sent, no answer" ([`ezmq_core::Error::OutcomeUnknown`]).

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, Pipeline, RedisError,
    RedisFuture, RedisResult, Value,
};
use tokio_util::task::AbortOnDropHandle;

/// One multiplexed connection and the task that drives it (aborted when
/// the last clone is dropped).
#[derive(Clone)]
pub(crate) struct LiveConnection {
    conn: MultiplexedConnection,
    driver: Arc<Driver>,
}

struct Driver {
    /// False once the driver task ended: the connection is dead.
    alive: Arc<AtomicBool>,
    _task: AbortOnDropHandle<()>,
}

impl LiveConnection {
    /// Connects (TCP or Unix socket) and does the Redis handshake (`AUTH`,
    /// `SELECT`), all within `connect_timeout`.
    pub(crate) async fn open(
        info: &ConnectionInfo,
        settings: &AsyncConnectionConfig,
        connect_timeout: Duration,
    ) -> RedisResult<Self> {
        match tokio::time::timeout(connect_timeout, Self::open_now(info, settings.clone())).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no connection to Redis within {connect_timeout:?}"),
            )
            .into()),
        }
    }

    async fn open_now(info: &ConnectionInfo, settings: AsyncConnectionConfig) -> RedisResult<Self> {
        let redis = info.redis_settings();
        match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                stream.set_nodelay(info.tcp_settings().nodelay())?;
                let (conn, driver) =
                    MultiplexedConnection::new_with_config(redis, stream, settings).await?;
                Ok(Self::driven(conn, driver))
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => {
                let stream = tokio::net::UnixStream::connect(path).await?;
                let (conn, driver) =
                    MultiplexedConnection::new_with_config(redis, stream, settings).await?;
                Ok(Self::driven(conn, driver))
            }
            _ => Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "unsupported Redis address: this build speaks plain TCP and Unix sockets (no TLS)",
            ))),
        }
    }

    fn driven(
        conn: MultiplexedConnection,
        driver: impl Future<Output = ()> + Send + 'static,
    ) -> Self {
        let alive = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&alive);
        let task = tokio::spawn(async move {
            driver.await;
            flag.store(false, Ordering::Release);
        });
        LiveConnection {
            conn,
            driver: Arc::new(Driver {
                alive,
                _task: AbortOnDropHandle::new(task),
            }),
        }
    }

    /// False once the connection is known dead.
    pub(crate) fn is_alive(&self) -> bool {
        self.driver.alive.load(Ordering::Acquire)
    }

    /// Marks the connection dead after an error that ends it (lost
    /// connection), at once: its driver may not have stopped yet, and the
    /// next command must not be sent on it.
    fn note<T>(&self, result: RedisResult<T>) -> RedisResult<T> {
        if let Err(err) = &result {
            if err.is_unrecoverable_error() || err.is_connection_dropped() {
                self.driver.alive.store(false, Ordering::Release);
            }
        }
        result
    }

    async fn send(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        let result = self.conn.send_packed_command(cmd).await;
        self.note(result)
    }

    async fn send_all(
        &mut self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let result = self
            .conn
            .send_packed_commands(pipeline, offset, count)
            .await;
        self.note(result)
    }
}

impl ConnectionLike for LiveConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(self.send(cmd))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(self.send_all(pipeline, offset, count))
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

/// The shared single-server connection: one live connection, made again
/// on first use after it died.
#[derive(Clone)]
pub(crate) struct SharedConnection {
    state: Arc<SharedState>,
}

struct SharedState {
    info: ConnectionInfo,
    settings: AsyncConnectionConfig,
    connect_timeout: Duration,
    current: Mutex<Option<LiveConnection>>,
    /// Held while connecting (one attempt at a time); the error of the
    /// last attempt when it failed.
    connecting: tokio::sync::Mutex<Option<RedisError>>,
    /// Connection attempts finished so far.
    attempts: AtomicU64,
    /// Set by [`SharedConnection::close`]: no new connection is made.
    closed: AtomicBool,
}

impl SharedConnection {
    /// Connects now (a first failure is the caller's connect error).
    pub(crate) async fn connect(
        info: ConnectionInfo,
        settings: AsyncConnectionConfig,
        connect_timeout: Duration,
    ) -> RedisResult<Self> {
        let shared = SharedConnection {
            state: Arc::new(SharedState {
                info,
                settings,
                connect_timeout,
                current: Mutex::new(None),
                connecting: tokio::sync::Mutex::new(None),
                attempts: AtomicU64::new(0),
                closed: AtomicBool::new(false),
            }),
        };
        shared.live().await?;
        Ok(shared)
    }

    fn current(&self) -> Option<LiveConnection> {
        let current = self
            .state
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        current.as_ref().filter(|c| c.is_alive()).cloned()
    }

    /// The live connection, made again first when it died. An error means
    /// nothing was sent. Callers that queued behind a failed attempt get
    /// its error rather than each trying again.
    pub(crate) async fn live(&self) -> RedisResult<LiveConnection> {
        if let Some(live) = self.current() {
            return Ok(live);
        }
        let seen = self.state.attempts.load(Ordering::Acquire);
        let mut last_failure = self.state.connecting.lock().await;
        if let Some(live) = self.current() {
            return Ok(live);
        }
        if self.state.closed.load(Ordering::Acquire) {
            return Err(RedisError::from((
                ErrorKind::Client,
                "the Redis backend is closed",
            )));
        }
        if self.state.attempts.load(Ordering::Acquire) != seen {
            if let Some(err) = last_failure.as_ref() {
                return Err(err.clone());
            }
        }
        let state = &self.state;
        let opened =
            LiveConnection::open(&state.info, &state.settings, state.connect_timeout).await;
        state.attempts.fetch_add(1, Ordering::AcqRel);
        match opened {
            Ok(live) => {
                *last_failure = None;
                *state.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(live.clone());
                tracing::debug!("Redis connection made");
                Ok(live)
            }
            Err(err) => {
                *last_failure = Some(err.clone());
                Err(err)
            }
        }
    }

    /// Drops the current connection (its driver stops once the commands
    /// in flight on it are done) and makes no new one.
    pub(crate) fn close(&self) {
        self.state.closed.store(true, Ordering::Release);
        self.state
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

impl ConnectionLike for SharedConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move { self.live().await?.send(cmd).await })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move { self.live().await?.send_all(pipeline, offset, count).await })
    }

    fn get_db(&self) -> i64 {
        self.state.info.redis_settings().db()
    }
}
