//! One Disque node: its identity, its shared connections ([`MuxPool`])
//! and its pool of dedicated connections for blocking `GETJOB`s.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex as StdMutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ConnectionAddr, IntoConnectionInfo, Value};

use crate::config::DisqueConfig;
use crate::error::{from_redis, DisqueError};
use crate::health::Health;
use crate::mux::MuxError;

mod pool;

use pool::MuxPool;

/// Identity of a node as learned from `HELLO`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeInfo {
    /// The 40-hex node id.
    pub(crate) id: String,
    /// `host:port` to dial.
    pub(crate) addr: String,
    /// Disque's priority: 1 healthy, higher is worse (failing, leaving).
    pub(crate) priority: u32,
}

/// A node with its connections. Shared (`Arc`) by the node table.
pub(crate) struct Node {
    pub(crate) info: NodeInfo,
    /// Latest priority from `HELLO` (starts as `info.priority`).
    priority: AtomicU32,
    client: Client,
    connect_timeout: Duration,
    pool_size: usize,
    /// The shared connections for every non-blocking command.
    pool: MuxPool,
    /// Idle connections used only for blocking `GETJOB`s.
    idle: StdMutex<Vec<MultiplexedConnection>>,
    /// See [`DisqueConfig::hang_timeout`](crate::DisqueConfig::hang_timeout).
    hang_timeout: Duration,
    /// Up, or down until a probe sees it answer.
    health: Health,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node").field("info", &self.info).finish()
    }
}

impl Node {
    /// A node with no connection open yet; `pool_size` idle `GETJOB`
    /// connections are kept.
    pub(crate) fn new(
        info: NodeInfo,
        config: &DisqueConfig,
        pool_size: usize,
    ) -> Result<Self, DisqueError> {
        let password = config.password.as_deref();
        let pool = MuxPool::new(info.addr.clone(), config);
        let (host, port) = crate::config::parse_addr(&info.addr)?;
        let mut redis_info = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
        if let Some(pw) = password {
            redis_info = redis_info.set_password(pw);
        }
        let conn_info = ConnectionAddr::Tcp(host, port)
            .into_connection_info()
            .map_err(|source| DisqueError::Connect {
                addr: info.addr.clone(),
                source,
            })?
            .set_redis_settings(redis_info);
        let client = Client::open(conn_info).map_err(|source| DisqueError::Connect {
            addr: info.addr.clone(),
            source,
        })?;
        Ok(Node {
            priority: AtomicU32::new(info.priority),
            info,
            client,
            connect_timeout: config.connect_timeout,
            pool_size,
            pool,
            idle: StdMutex::new(Vec::new()),
            hang_timeout: config.hang_timeout,
            health: Health::default(),
        })
    }

    /// The node's latest known priority (1 healthy, higher is worse).
    pub(crate) fn priority(&self) -> u32 {
        self.priority.load(Ordering::Relaxed)
    }

    /// Updates the priority from a fresh `HELLO`.
    pub(crate) fn set_priority(&self, priority: u32) {
        self.priority.store(priority, Ordering::Relaxed);
    }

    pub(crate) fn addr(&self) -> &str {
        &self.info.addr
    }

    /// Opens a dedicated connection (blocking commands, the idle pool).
    /// Response timeouts are enforced by the caller per
    /// command (a blocking `GETJOB` must not be cut), so none is set here.
    async fn open(&self) -> Result<MultiplexedConnection, DisqueError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(None);
        let opened = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await;
        connected(&self.info.addr, opened)
    }

    /// Runs a non-blocking command on a shared connection (pipelined with
    /// every other concurrent caller), within `timeout`.
    ///
    /// The common case (a connection open and not held up) awaits the
    /// command alone; opening a connection is a separate boxed future, so
    /// the (large) connect state is not part of every command's future,
    /// which callers box and move.
    pub(crate) async fn query(
        &self,
        name: &'static str,
        cmd: &redis::Cmd,
        timeout: Duration,
    ) -> Result<Value, DisqueError> {
        let result = match self.pool.ready() {
            Some(conn) => {
                let reply = async { conn.send(cmd).await.map_err(|e| self.mux_error(name, e)) };
                self.watched(name, reply, Duration::ZERO, timeout).await
            }
            None => Box::pin(self.query_connecting(name, cmd, timeout)).await,
        };
        self.record(&result);
        result
    }

    /// Runs `count` non-blocking commands, written in RESP in `packed`, on
    /// one shared connection, sent together in one write, within `timeout` for all of them: each
    /// one's reply or error, in order, or the error of the whole send (a
    /// timeout, a connection that failed). `None` when no connection is
    /// open (the caller sends them one by one, which connects).
    pub(crate) async fn query_many(
        &self,
        name: &'static str,
        packed: &[u8],
        count: usize,
        timeout: Duration,
    ) -> Option<Result<Vec<Result<Value, DisqueError>>, DisqueError>> {
        let conn = self.pool.ready()?;
        let replies = async {
            conn.send_many(packed, count)
                .await
                .map_err(|e| self.mux_error(name, e))
        };
        let outcome = self
            .watched(name, replies, Duration::ZERO, timeout)
            .await
            .map(|replies| {
                replies
                    .into_iter()
                    .map(|reply| reply.map_err(|e| self.mux_error(name, e)))
                    .collect::<Vec<_>>()
            });
        match &outcome {
            Ok(replies) => match replies.iter().find(|r| r.is_err()) {
                Some(Err(DisqueError::Io { .. } | DisqueError::Connect { .. })) => {
                    self.mark_down("connection failed");
                }
                _ => self.record(&Ok(Value::Okay)),
            },
            Err(DisqueError::Io { .. } | DisqueError::Connect { .. }) => {
                self.mark_down("connection failed");
            }
            Err(_) => {}
        }
        Some(outcome)
    }

    /// [`Node::query`] when a connection must be opened first; `timeout`
    /// covers the connect and the command.
    async fn query_connecting(
        &self,
        name: &'static str,
        cmd: &redis::Cmd,
        timeout: Duration,
    ) -> Result<Value, DisqueError> {
        let reply = async {
            let conn = self.pool.connection().await?;
            conn.send(cmd).await.map_err(|e| self.mux_error(name, e))
        };
        self.watched(name, reply, Duration::ZERO, timeout).await
    }

    fn mux_error(&self, name: &'static str, err: MuxError) -> DisqueError {
        match err {
            MuxError::Server { code, message } => DisqueError::Server {
                command: name,
                addr: self.info.addr.clone(),
                code,
                message,
            },
            MuxError::Connection(source) => DisqueError::Io {
                command: name,
                addr: self.info.addr.clone(),
                source,
            },
            MuxError::Unsent(source) => DisqueError::Connect {
                addr: self.info.addr.clone(),
                source,
            },
        }
    }

    /// Awaits `reply` for up to `timeout`. A reply still missing after
    /// `expected` (a blocking command's own wait) plus the hang timeout
    /// makes this caller check that the node answers at all (unless another
    /// caller does already), and gives up as soon as the node is marked
    /// down.
    async fn watched<T>(
        &self,
        name: &'static str,
        reply: impl Future<Output = Result<T, DisqueError>>,
        expected: Duration,
        timeout: Duration,
    ) -> Result<T, DisqueError> {
        let downs = self.health.downs();
        let check_after = expected.saturating_add(self.hang_timeout);
        tokio::pin!(reply);
        if check_after >= timeout {
            return tokio::time::timeout(timeout, reply)
                .await
                .unwrap_or_else(|_| Err(self.timed_out(name, timeout)));
        }
        if let Ok(result) = tokio::time::timeout(check_after, &mut reply).await {
            return result;
        }
        Box::pin(self.slow(name, reply, downs, check_after, timeout)).await
    }

    /// The rest of [`Node::watched`] once the reply is late.
    async fn slow<T, F>(
        &self,
        name: &'static str,
        reply: Pin<&mut F>,
        downs: u64,
        waited: Duration,
        timeout: Duration,
    ) -> Result<T, DisqueError>
    where
        F: Future<Output = Result<T, DisqueError>>,
    {
        let down = self.health.signal();
        if self.health.downs() != downs || self.health.is_down() {
            // Marked down since the command was sent, or sent to a node
            // already down (the last resort) that did not answer either.
            return Err(self.down_error(name));
        }
        let check = async {
            // A node still answering on another connection is slow, not
            // hung: keep waiting for this reply (up to its timeout).
            while let Some(answered) = self.pool.answered_within(self.hang_timeout) {
                tokio::time::sleep(self.hang_timeout.saturating_sub(answered)).await;
            }
            if let Some(_probing) = self.health.start_probe() {
                if !self.answers_ping().await
                    && self.pool.answered_within(self.hang_timeout).is_none()
                {
                    self.mark_down("no answer to PING or any command while a command waited");
                }
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            biased;
            result = tokio::time::timeout(timeout.saturating_sub(waited), reply) => {
                result.unwrap_or_else(|_| Err(self.timed_out(name, timeout)))
            }
            () = down.cancelled() => Err(self.down_error(name)),
            () = check => Err(self.down_error(name)),
        }
    }

    /// True when the node answers a `PING` on a fresh connection within the
    /// hang timeout (an error reply counts: the node is alive).
    pub(crate) async fn answers_ping(&self) -> bool {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.hang_timeout))
            .set_response_timeout(None);
        let ping = async {
            let mut conn = self
                .client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            redis::cmd("PING").query_async::<Value>(&mut conn).await
        };
        match tokio::time::timeout(self.hang_timeout, ping).await {
            Ok(Ok(_)) => true,
            Ok(Err(e)) => e.code().is_some(),
            Err(_) => false,
        }
    }

    /// Marks the node down (see [`Health`]) and drops its connections.
    pub(crate) fn mark_down(&self, why: &'static str) {
        if self.health.mark_down() {
            tracing::warn!(node = %self.info.addr, why, "Disque node marked down; routing around it until it answers again");
        }
        self.drop_connections();
    }

    /// Marks the node up again.
    pub(crate) fn mark_up(&self) {
        if self.health.mark_up() {
            tracing::info!(node = %self.info.addr, "Disque node answers again");
        }
    }

    /// True while the node is down in this client's view.
    pub(crate) fn is_down(&self) -> bool {
        self.health.is_down()
    }

    fn down_error(&self, name: &'static str) -> DisqueError {
        DisqueError::NodeDown {
            command: name,
            addr: self.info.addr.clone(),
        }
    }

    fn timed_out(&self, name: &'static str, timeout: Duration) -> DisqueError {
        DisqueError::Timeout {
            command: name,
            addr: self.info.addr.clone(),
            after: timeout,
        }
    }

    /// Runs a blocking command (`GETJOB`) on a dedicated connection taken
    /// from the pool; the connection goes back only after a clean reply,
    /// so a dropped or failed call never leaves a half-read connection.
    ///
    /// `wait` is how long the command itself may block (a reply later than
    /// that plus the hang timeout makes the node suspect).
    pub(crate) async fn query_blocking(
        &self,
        name: &'static str,
        cmd: &redis::Cmd,
        wait: Duration,
        timeout: Duration,
    ) -> Result<Value, DisqueError> {
        let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let reply = async {
            let mut conn = match pooled {
                Some(conn) => conn,
                None => self.open().await?,
            };
            let value = cmd
                .query_async::<Value>(&mut conn)
                .await
                .map_err(|e| from_redis(name, &self.info.addr, e))?;
            Ok::<_, DisqueError>((value, conn))
        };
        let result = match self.watched(name, reply, wait, timeout).await {
            Ok((value, conn)) => {
                if let Ok(mut idle) = self.idle.lock() {
                    if idle.len() < self.pool_size {
                        idle.push(conn);
                    }
                }
                Ok(value)
            }
            Err(e) => Err(e),
        };
        self.record(&result);
        result
    }

    /// Marks the node down after a connection failure (so every command
    /// waiting on it fails over and the next ones route around it), or up
    /// after an answer.
    fn record(&self, result: &Result<Value, DisqueError>) {
        match result {
            Err(DisqueError::Io { .. } | DisqueError::Connect { .. }) => {
                self.mark_down("connection failed");
            }
            // A timeout alone says nothing: the PING in `slow` decides.
            Err(_) => {}
            // The common case: one atomic load.
            Ok(_) if !self.health.is_down() => {}
            Ok(_) => self.mark_up(),
        }
    }

    /// Closes every connection: commands in flight on the shared one get
    /// their replies for up to `drain`, then its tasks are joined.
    pub(crate) async fn disconnect(&self, drain: Duration) {
        let shared = self.pool.take_all().await;
        self.drop_connections();
        futures::future::join_all(shared.iter().map(|mux| mux.close(drain))).await;
    }

    /// Forgets the shared connection and the idle pool (commands still in
    /// flight keep their own handles).
    fn drop_connections(&self) {
        self.pool.clear();
        if let Ok(mut idle) = self.idle.lock() {
            idle.clear();
        }
    }
}

/// A stable 64-bit FNV-1a hash: identical in every process and version,
/// unlike `std`'s `DefaultHasher`.
pub(crate) fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Separator so ("ab","c") and ("a","bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Rendezvous (highest random weight) score of `topic` on node `id`.
pub(crate) fn affinity_score(topic: &str, id: &str) -> u64 {
    fnv1a(&[topic.as_bytes(), id.as_bytes()])
}

/// Parses a `HELLO` reply: `[1, myid, [id, host, port, priority]...]`.
/// A node reporting an empty host is reached at `dialed` (its own address
/// as we know it).
pub(crate) fn parse_hello(value: &Value, dialed: &str) -> Option<(String, Vec<NodeInfo>)> {
    let Value::Array(items) = value else {
        return None;
    };
    let myid = as_string(items.get(1)?)?;
    let mut nodes = Vec::new();
    for entry in items.iter().skip(2) {
        let Value::Array(fields) = entry else {
            return None;
        };
        let id = as_string(fields.first()?)?;
        let host = as_string(fields.get(1)?)?;
        let port = as_u64(fields.get(2)?)?;
        let priority = fields.get(3).and_then(as_u64).unwrap_or(1);
        let addr = if host.is_empty() || port == 0 {
            if id == myid {
                dialed.to_owned()
            } else {
                continue;
            }
        } else if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        nodes.push(NodeInfo {
            id,
            addr,
            priority: u32::try_from(priority).unwrap_or(u32::MAX),
        });
    }
    if !nodes.iter().any(|n| n.id == myid) {
        nodes.push(NodeInfo {
            id: myid.clone(),
            addr: dialed.to_owned(),
            priority: 1,
        });
    }
    Some((myid, nodes))
}

pub(crate) fn as_string(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".to_owned()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

pub(crate) fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.trim().parse().ok(),
        Value::SimpleString(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Logs a new connection to the node at `addr`, or names the node in the
/// failure.
pub(crate) fn connected<T>(
    addr: &str,
    opened: Result<T, redis::RedisError>,
) -> Result<T, DisqueError> {
    let conn = opened.map_err(|source| DisqueError::Connect {
        addr: addr.to_owned(),
        source,
    })?;
    tracing::debug!(node = %addr, "connected to Disque node");
    Ok(conn)
}

#[cfg(test)]
mod tests;
