//! One AMQP connection with its publisher-confirm channel, and the
//! reconnecting holder of the current one.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, RwLock};
use std::time::{Duration, Instant};

use ezmq_core::{ConnectFailure, Error, Result};
use futures::FutureExt;
use lapin::options::ConfirmSelectOptions;
use lapin::{Channel, Connection, ConnectionProperties};
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::config::{redact, RabbitConfig};
use crate::declared::{Declared, DeclaredSet};
use crate::error::RabbitError;

/// A live connection: its generation (bumped on every reconnect), the
/// channel publishes and their confirms go through, and what has been
/// declared on it (declarations are redone after a reconnect).
pub(crate) struct Session {
    pub(crate) generation: u64,
    /// [`RabbitConfig::operation_timeout`].
    timeout: Duration,
    connection: Arc<Connection>,
    publisher: StdMutex<Channel>,
    /// The channel declarations go through, opened on first use and
    /// reopened after a refused declaration closed it (one channel for
    /// them all, instead of one per declaration).
    declarer: Arc<tokio::sync::Mutex<Option<Channel>>>,
    /// The tasks declarations run in. A declaration finishes even when its
    /// caller is dropped half-way: abandoned, it would leave the channel
    /// with an answer (a refusal closes the channel) that the next
    /// declaration would take for its own.
    declarations: StdMutex<JoinSet<()>>,
    declared: Arc<DeclaredSet>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("generation", &self.generation)
            .field("connected", &self.is_alive())
            .finish()
    }
}

impl Session {
    async fn open(config: &RabbitConfig, generation: u64) -> Result<Self, RabbitError> {
        let url = redact(&config.url);
        let properties = ConnectionProperties::default()
            .with_connection_name(format!("ezmq-{}", std::process::id()).into());
        let connection = tokio::time::timeout(
            config.connect_timeout,
            Connection::connect(&config.url, properties),
        )
        .await
        .map_err(|_| RabbitError::Timeout {
            op: "connect",
            target: url.clone(),
        })?
        .map_err(|e| RabbitError::amqp("connect", url.clone(), e))?;
        let timeout = config.operation_timeout;
        let publisher = within(
            timeout,
            "channel.open",
            "publisher",
            confirm_channel(&connection),
        )
        .await?;
        Ok(Session {
            generation,
            timeout,
            connection: Arc::new(connection),
            publisher: StdMutex::new(publisher),
            declarer: Arc::new(tokio::sync::Mutex::new(None)),
            declarations: StdMutex::new(JoinSet::new()),
            declared: Arc::default(),
        })
    }

    /// True while the connection is up.
    pub(crate) fn is_alive(&self) -> bool {
        self.connection.status().connected()
    }

    /// The AMQP connection, for its state and the settings negotiated
    /// with the broker (the health report).
    pub(crate) fn connection(&self) -> &Connection {
        &self.connection
    }

    /// A new channel (for consumers and reply inboxes).
    pub(crate) async fn channel(&self) -> Result<Channel, RabbitError> {
        self.bounded("channel.open", "", open_channel(&self.connection))
            .await
    }

    /// Runs `op` (an exchange with the broker) within
    /// [`RabbitConfig::operation_timeout`].
    pub(crate) fn bounded<'a, T: 'a>(
        &self,
        op: &'static str,
        target: &'a str,
        exchange: impl Future<Output = Result<T, RabbitError>> + 'a,
    ) -> impl Future<Output = Result<T, RabbitError>> + 'a {
        within(self.timeout, op, target, exchange)
    }

    /// [`RabbitConfig::operation_timeout`].
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The publisher-confirm channel, reopened when the broker closed it.
    pub(crate) async fn publisher(&self) -> Result<Channel, RabbitError> {
        let current = self.publisher.lock().map(|c| c.clone()).ok();
        if let Some(channel) = current.filter(|c| c.status().connected()) {
            return Ok(channel);
        }
        let fresh = self
            .bounded(
                "channel.open",
                "publisher",
                confirm_channel(&self.connection),
            )
            .await?;
        if let Ok(mut slot) = self.publisher.lock() {
            if slot.status().connected() {
                return Ok(slot.clone());
            }
            *slot = fresh.clone();
        }
        Ok(fresh)
    }

    /// Runs `declare` on the declaring channel, in a task of its own that
    /// finishes even when the caller is dropped. Declarations take turns;
    /// a channel the broker closed (it does when it refuses one, e.g. a
    /// queue declared again with other arguments) is replaced before the
    /// next.
    pub(crate) async fn declaring<T, F, Fut>(
        &self,
        target: &str,
        declare: F,
    ) -> Result<T, RabbitError>
    where
        T: Send + 'static,
        F: FnOnce(Channel) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, RabbitError>> + Send + 'static,
    {
        self.in_turn(target, None, declare).await
    }

    /// [`Session::declaring`] once per connection for `what` named
    /// `target`: the declaration checks again when its turn comes, so
    /// callers that queued behind the first one send nothing (one
    /// declaration of the delay levels however many pushes wait for it).
    pub(crate) async fn declaring_once<F, Fut>(
        &self,
        what: Declared,
        target: &str,
        declare: F,
    ) -> Result<(), RabbitError>
    where
        F: FnOnce(Channel) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), RabbitError>> + Send + 'static,
    {
        if self.declared.contains(what, target) {
            return Ok(());
        }
        self.in_turn(target, Some((what, ())), declare).await
    }

    async fn in_turn<T, F, Fut>(
        &self,
        target: &str,
        once: Option<(Declared, T)>,
        declare: F,
    ) -> Result<T, RabbitError>
    where
        T: Send + 'static,
        F: FnOnce(Channel) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, RabbitError>> + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let connection = Arc::clone(&self.connection);
        let declarer = Arc::clone(&self.declarer);
        let declared = Arc::clone(&self.declared);
        let (limit, name) = (self.timeout, target.to_owned());
        let declaration = async move {
            let mut slot = declarer.lock().await;
            if answer.is_closed() {
                // Its caller gave up while it waited its turn (behind one
                // that timed out): nothing was sent for it, skip it.
                return;
            }
            let once = match once {
                Some((what, done)) if declared.contains(what, &name) => {
                    // Declared by the one it queued behind.
                    let _ = answer.send(Ok(done));
                    return;
                }
                once => once.map(|(what, _)| what),
            };
            let channel = match slot.as_ref().filter(|c| c.status().connected()) {
                Some(channel) => channel.clone(),
                None => match within(limit, "channel.open", &name, open_channel(&connection)).await
                {
                    Ok(fresh) => slot.insert(fresh).clone(),
                    Err(err) => {
                        let _ = answer.send(Err(err));
                        return;
                    }
                },
            };
            let outcome = within(limit, "declare", &name, declare(channel.clone())).await;
            match (&outcome, once) {
                (Ok(_), Some(what)) => declared.insert(what, &name),
                (Err(RabbitError::Timeout { .. }), _) => {
                    // Its answer may still come: the next declaration must
                    // not take it for its own.
                    *slot = None;
                    if let Err(err) =
                        close_channel(&channel, limit, &name, "declaration timed out").await
                    {
                        tracing::debug!(cause = %err, "closing a timed-out declaration's channel failed");
                    }
                }
                _ => {}
            }
            let _ = answer.send(outcome);
        };
        match self.declarations.lock() {
            Ok(mut tasks) => {
                while tasks.try_join_next().is_some() {}
                tasks.spawn(declaration.in_current_span());
            }
            Err(_) => {
                return Err(RabbitError::Interrupted {
                    target: target.to_owned(),
                })
            }
        }
        // The declaration bounds each of its steps; this bounds the wait
        // for the declarations queued before it as well.
        match tokio::time::timeout(self.timeout.saturating_mul(2), answered).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(RabbitError::Interrupted {
                target: target.to_owned(),
            }),
            Err(_) => Err(RabbitError::Timeout {
                op: "declare",
                target: target.to_owned(),
            }),
        }
    }

    /// What has been declared on this connection.
    pub(crate) fn declared(&self) -> &DeclaredSet {
        &self.declared
    }

    async fn close(&self) {
        let mut declarations = match self.declarations.lock() {
            Ok(mut tasks) => std::mem::take(&mut *tasks),
            Err(_) => JoinSet::new(),
        };
        declarations.shutdown().await;
        if self.is_alive() {
            let closing = async {
                self.connection
                    .close(200, "ezmq client closed".into())
                    .await
                    .map_err(|e| RabbitError::amqp("connection.close", "", e))
            };
            if let Err(err) = self.bounded("connection.close", "", closing).await {
                tracing::debug!(cause = %err, "closing the AMQP connection failed");
            }
        }
    }
}

/// `exchange`, or [`RabbitError::Timeout`] when it takes longer than
/// `limit`.
///
/// A plain function over a combinator, not an `async fn`: an `async fn`
/// would hold `exchange` twice in its state (argument and timeout), and
/// a publish's future is copied whole at every level it is awaited from.
pub(crate) fn within<'a, T: 'a>(
    limit: Duration,
    op: &'static str,
    target: &'a str,
    exchange: impl Future<Output = Result<T, RabbitError>> + 'a,
) -> impl Future<Output = Result<T, RabbitError>> + 'a {
    tokio::time::timeout(limit, exchange).map(move |done| {
        done.unwrap_or_else(|_| {
            Err(RabbitError::Timeout {
                op,
                target: target.to_owned(),
            })
        })
    })
}

/// Closes `channel` (a consumer's, an inbox's; `target` names it in
/// errors) within `limit`: a broker that stopped answering cannot hold up
/// a shutdown. A channel already closed is left as it is.
pub(crate) async fn close_channel(
    channel: &Channel,
    limit: Duration,
    target: &str,
    why: &str,
) -> Result<(), RabbitError> {
    if !channel.status().connected() {
        return Ok(());
    }
    let closing = async {
        channel
            .close(200, why.into())
            .await
            .map_err(|e| RabbitError::amqp("channel.close", target, e))
    };
    within(limit, "channel.close", target, closing).await
}

async fn open_channel(connection: &Connection) -> Result<Channel, RabbitError> {
    connection
        .create_channel()
        .await
        .map_err(|e| RabbitError::amqp("channel.open", "", e))
}

async fn confirm_channel(connection: &Connection) -> Result<Channel, RabbitError> {
    let channel = connection
        .create_channel()
        .await
        .map_err(|e| RabbitError::amqp("channel.open", "publisher", e))?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| RabbitError::amqp("confirm.select", "publisher", e))?;
    Ok(channel)
}

/// Reconnection state: when the next attempt is allowed.
#[derive(Debug, Default)]
struct Reconnect {
    next_generation: u64,
    failures: u32,
    retry_at: Option<Instant>,
    /// Why the last attempt failed, repeated while backing off.
    last_failure: ConnectFailure,
}

/// Holds the current [`Session`] and replaces it when the connection
/// drops. Reconnecting is lazy (the next call that needs the broker
/// reconnects) and backs off after failures: calls during the backoff fail
/// at once with a retryable [`Error::Connect`] instead of piling up.
pub(crate) struct Connector {
    config: RabbitConfig,
    current: RwLock<Option<Arc<Session>>>,
    reconnect: tokio::sync::Mutex<Reconnect>,
    closed: AtomicBool,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("url", &redact(&self.config.url))
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl Connector {
    pub(crate) fn new(config: RabbitConfig) -> Self {
        Connector {
            config,
            current: RwLock::new(None),
            reconnect: tokio::sync::Mutex::new(Reconnect::default()),
            closed: AtomicBool::new(false),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn live(&self) -> Option<Arc<Session>> {
        self.current
            .read()
            .ok()
            .and_then(|s| s.clone())
            .filter(|s| s.is_alive())
    }

    /// The live session, reconnecting when the last one dropped.
    pub(crate) async fn session(&self) -> Result<Arc<Session>> {
        if self.is_closed() {
            return Err(Error::Shutdown);
        }
        if let Some(session) = self.live() {
            return Ok(session);
        }
        // Boxed: the connect future is large, and inline it would be
        // copied with every publish's future.
        Box::pin(self.reconnect()).await
    }

    /// [`Connector::session`] when no live session is at hand.
    async fn reconnect(&self) -> Result<Arc<Session>> {
        let mut state = self.reconnect.lock().await;
        if let Some(session) = self.live() {
            return Ok(session);
        }
        if self.is_closed() {
            return Err(Error::Shutdown);
        }
        if let Some(at) = state.retry_at.filter(|at| *at > Instant::now()) {
            return Err(Error::Connect {
                addrs: redact(&self.config.url),
                failure: state.last_failure,
                source: format!(
                    "broker unreachable; next reconnection attempt in {:?}",
                    at - Instant::now()
                )
                .into(),
            });
        }
        let generation = state.next_generation;
        match Session::open(&self.config, generation).await {
            Ok(session) => {
                if generation > 0 {
                    tracing::info!(generation, "reconnected to RabbitMQ");
                }
                state.next_generation += 1;
                state.failures = 0;
                state.retry_at = None;
                let session = Arc::new(session);
                if let Ok(mut current) = self.current.write() {
                    *current = Some(Arc::clone(&session));
                }
                Ok(session)
            }
            Err(err) => {
                state.failures = state.failures.saturating_add(1);
                let backoff = Duration::from_millis(100)
                    .saturating_mul(1 << state.failures.min(10))
                    .min(self.config.max_reconnect_backoff);
                state.retry_at = Some(Instant::now() + backoff);
                let error = crate::connect_failure::connect_error(
                    &self.config.url,
                    redact(&self.config.url),
                    err,
                )
                .await;
                // The first connection's error goes back to the caller,
                // who decides; only a running backend retries by itself.
                if generation > 0 {
                    tracing::warn!(cause = %error, retry_in = ?backoff,
                        "cannot reconnect to RabbitMQ; retrying");
                }
                if let Error::Connect { failure, .. } = &error {
                    state.last_failure = *failure;
                }
                Err(error)
            }
        }
    }

    /// Drops `generation`'s session after an error that showed it dead.
    pub(crate) fn invalidate(&self, generation: u64) {
        if let Ok(mut current) = self.current.write() {
            if current
                .as_ref()
                .is_some_and(|s| s.generation == generation && !s.is_alive())
            {
                *current = None;
            }
        }
    }

    /// Closes the connection; every later call fails with
    /// [`Error::Shutdown`].
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _state = self.reconnect.lock().await;
        let session = self.current.write().ok().and_then(|mut s| s.take());
        if let Some(session) = session {
            session.close().await;
        }
    }
}
