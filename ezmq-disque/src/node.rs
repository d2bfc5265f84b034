//! One Disque node: its identity, its shared connections ([`Mux`]) and its
//! pool of dedicated connections for blocking `GETJOB`s.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex as StdMutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ConnectionAddr, IntoConnectionInfo, Value};
use tokio::sync::Mutex;

use crate::config::DisqueConfig;
use crate::error::{from_redis, DisqueError};
use crate::health::Health;
use crate::mux::{stamp, Mux, MuxError};

/// A connection whose oldest unanswered command has waited this long is
/// held up: the next command goes down another one (see
/// [`DisqueConfig::connections_per_node`]).
const HELD_UP: Duration = Duration::from_millis(10);

/// A pool grows only while the node answered on one of its connections
/// this recently (see [`Node::ready_mux`]).
const ANSWERED_LATELY: Duration = Duration::from_millis(300);

/// Connections opened at once for a node whose open ones are all held up
/// (a burst of commands failing over to it fills a pool fast).
const MAX_ADDING: usize = 8;

/// One of the [`MAX_ADDING`] rights to open a connection; given back on
/// drop.
struct AddingSlot<'a>(&'a AtomicUsize);

impl<'a> AddingSlot<'a> {
    fn take(adding: &'a AtomicUsize) -> Option<Self> {
        adding
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_ADDING).then_some(n + 1)
            })
            .ok()
            .map(|_| AddingSlot(adding))
    }
}

impl Drop for AddingSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

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
    /// Sent with `AUTH` on the shared connection.
    password: Option<String>,
    connect_timeout: Duration,
    pool_size: usize,
    /// See [`DisqueConfig::connections_per_node`].
    max_muxes: usize,
    /// The shared connections for every non-blocking command, the first
    /// one used while it is not held up ([`HELD_UP`]). A plain mutex: it is
    /// only held to pick and clone a handle, on every command.
    muxes: StdMutex<Vec<Mux>>,
    /// Held while opening the first of `muxes`, so concurrent callers open
    /// one connection, not one each.
    connecting: Mutex<()>,
    /// Connections being added to a held-up pool ([`AddingSlot`]).
    adding: AtomicUsize,
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
            password: password.map(str::to_owned),
            connect_timeout: config.connect_timeout,
            pool_size,
            max_muxes: config.connections_per_node.max(1),
            muxes: StdMutex::new(Vec::new()),
            connecting: Mutex::new(()),
            adding: AtomicUsize::new(0),
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
        self.connected(opened)
    }

    /// Logs a new connection, or names the node in the failure.
    fn connected<T>(&self, opened: Result<T, redis::RedisError>) -> Result<T, DisqueError> {
        let conn = opened.map_err(|source| DisqueError::Connect {
            addr: self.info.addr.clone(),
            source,
        })?;
        tracing::debug!(node = %self.info.addr, "connected to Disque node");
        Ok(conn)
    }

    /// A shared connection to send the next command on, without waiting:
    /// with one connection, that one while it is not held up
    /// ([`HELD_UP`]); with more, an idle one, else the one with the fewest
    /// commands waiting (each waits for all before it). `None` when none is
    /// open, or when every one is held up, another may be opened and the
    /// node still answers ([`Node::connection`] then opens one).
    fn ready_mux(&self) -> Option<Mux> {
        let muxes = self.mux_slot();
        let now = stamp();
        if let [only] = muxes.as_slice() {
            // The common case: a node that answers keeps one connection.
            return (only.stalled_for(now) < HELD_UP || self.max_muxes == 1).then(|| only.clone());
        }
        let mut best: Option<(&Mux, usize)> = None;
        let mut all_held_up = true;
        for mux in muxes.iter() {
            let waiting = mux.in_flight();
            if waiting == 0 {
                return Some(mux.clone());
            }
            all_held_up &= mux.stalled_for(now) >= HELD_UP;
            if best.is_none_or(|(_, fewest)| waiting < fewest) {
                best = Some((mux, waiting));
            }
        }
        let (mux, _) = best?;
        let grow = all_held_up
            && muxes.len() < self.max_muxes
            // A node silent on every connection is stopped or hung, not
            // slow: more connections would only queue more commands on it.
            && muxes.iter().any(|m| {
                Duration::from_micros(now.saturating_sub(m.last_reply())) < ANSWERED_LATELY
            });
        if grow {
            return None;
        }
        Some(mux.clone())
    }

    /// The connection for a command when [`Node::ready_mux`] had none:
    /// opens the first connection (waiting for it), or adds one to a pool
    /// whose connections are all held up. Adding is bounded by the hang
    /// timeout and done by [`MAX_ADDING`] callers at a time; the others,
    /// and this one if it fails, use the least held-up open connection.
    async fn connection(&self) -> Result<Mux, DisqueError> {
        if self.mux_slot().is_empty() {
            return self.first_connection().await;
        }
        if let Some(_adding) = AddingSlot::take(&self.adding) {
            if self.ready_mux().is_none() {
                match self.open_mux(self.hang_timeout).await {
                    Ok(mux) => {
                        let mut muxes = self.mux_slot();
                        if muxes.len() >= self.max_muxes {
                            // Others added the last ones meanwhile: this one
                            // serves this command only.
                            return Ok(mux);
                        }
                        muxes.push(mux.clone());
                        tracing::debug!(
                            node = %self.info.addr,
                            connections = muxes.len(),
                            "every connection to the node is held up by a slow reply; opened another"
                        );
                        return Ok(mux);
                    }
                    Err(e) => {
                        tracing::debug!(node = %self.info.addr, cause = %e, "could not add a connection");
                    }
                }
            }
        }
        match self.least_held_up() {
            Some(mux) => Ok(mux),
            // Every connection failed meanwhile.
            None => self.first_connection().await,
        }
    }

    /// Opens the first connection (also after every one failed); callers
    /// arriving meanwhile wait for it and share it.
    async fn first_connection(&self) -> Result<Mux, DisqueError> {
        let _connecting = self.connecting.lock().await;
        // Another caller may have connected while we waited.
        if let Some(mux) = self.mux_slot().first() {
            return Ok(mux.clone());
        }
        let mux = self.open_mux(self.connect_timeout).await?;
        self.mux_slot().push(mux.clone());
        Ok(mux)
    }

    /// The open connection with the fewest commands waiting, if any.
    fn least_held_up(&self) -> Option<Mux> {
        self.mux_slot()
            .iter()
            .min_by_key(|mux| mux.in_flight())
            .cloned()
    }

    /// Opens a shared connection (TCP and `AUTH`) within `timeout`.
    async fn open_mux(&self, timeout: Duration) -> Result<Mux, DisqueError> {
        let opened = Mux::connect(&self.info.addr, self.password.as_deref(), timeout).await;
        self.connected(opened)
    }

    /// Open shared connections (a failed one is dropped on the way).
    fn mux_slot(&self) -> std::sync::MutexGuard<'_, Vec<Mux>> {
        let mut muxes = self
            .muxes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if muxes.first().is_some_and(Mux::is_failed) {
            muxes.retain(|mux| !mux.is_failed());
        }
        muxes
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
        let result = match self.ready_mux() {
            Some(conn) => {
                let reply = async { conn.send(cmd).await.map_err(|e| self.mux_error(name, e)) };
                self.watched(name, reply, Duration::ZERO, timeout).await
            }
            None => Box::pin(self.query_connecting(name, cmd, timeout)).await,
        };
        self.record(&result);
        result
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
            let conn = self.connection().await?;
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
            while let Some(answered) = self.answered_within(self.hang_timeout) {
                tokio::time::sleep(self.hang_timeout.saturating_sub(answered)).await;
            }
            if let Some(_probing) = self.health.start_probe() {
                if !self.answers_ping().await && self.answered_within(self.hang_timeout).is_none() {
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

    /// How long ago the node last answered on one of its shared
    /// connections, if that is less than `within`.
    fn answered_within(&self, within: Duration) -> Option<Duration> {
        let now = stamp();
        let latest = self.mux_slot().iter().map(Mux::last_reply).max()?;
        if latest == 0 {
            return None;
        }
        let ago = Duration::from_micros(now.saturating_sub(latest));
        (ago < within).then_some(ago)
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
        let _connecting = self.connecting.lock().await;
        let shared = std::mem::take(&mut *self.mux_slot());
        self.drop_connections();
        futures::future::join_all(shared.iter().map(|mux| mux.close(drain))).await;
    }

    /// Forgets the shared connection and the idle pool (commands still in
    /// flight keep their own handles).
    fn drop_connections(&self) {
        self.mux_slot().clear();
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

#[cfg(test)]
mod tests;
