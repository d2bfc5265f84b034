//! A Disque-compatible (1.0-rc1) in-memory job queue server: a single node
//! ([`EmbeddedDisque`]) or an in-process cluster of nodes for tests
//! ([`EmbeddedCluster`]).
//!
//! It speaks RESP2 over TCP like antirez's Disque and implements ADDJOB,
//! GETJOB, ACKJOB, FASTACK, NACK, WORKING, DELJOB, SHOW, ENQUEUE, DEQUEUE,
//! QLEN, QPEEK, QSTAT, QSCAN, JSCAN, PAUSE, HELLO, INFO, PING, AUTH and QUIT.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ezmq_disque_server::Error> {
//! use ezmq_disque_server::{EmbeddedDisque, ServerConfig};
//! let server = EmbeddedDisque::start(ServerConfig::default().with_port(0)).await?;
//! println!("listening on {} as node {}", server.addr(), server.node_id());
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod body;
#[cfg(feature = "cli")]
pub mod cli;
mod clients;
mod cluster;
mod cmd;
mod connection;
mod frame;
#[doc(hidden)]
pub mod fuzzing;
mod job;
mod jobtable;
mod limits;
mod parse;
mod persist;
mod queue;
mod server;
mod settings;
mod shutdown;
mod state;
mod stats;
mod timers;
mod waiters;

pub use cluster::{ClusterNode, EmbeddedCluster};
pub use persist::{AppendFsync, ParseAppendFsyncError};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

/// Default Disque port.
pub const DEFAULT_PORT: u16 = 7711;

/// Errors returned by the server library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configured node ID is not 40 hex characters.
    #[error("invalid node id {0:?}: expected 40 hex characters")]
    InvalidNodeId(String),
    /// The listening socket could not be bound.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// Address that was requested.
        addr: SocketAddr,
        /// Underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A cluster needs between 1 and 65535 nodes (and ports).
    #[error("invalid cluster size {0}")]
    InvalidClusterSize(usize),
    /// Any other I/O error.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The data directory or the append-only file could not be used.
    #[error("persistence: {path}: {source}")]
    Persistence {
        /// The file or directory.
        path: PathBuf,
        /// Underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file at the append-only file's path is not one written by this
    /// server (it is left alone).
    #[error("{0}: not an ezmq-disque-server append-only file")]
    AofFormat(PathBuf),
}

/// Server configuration (builder style).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    bind: IpAddr,
    port: u16,
    node_id: Option<String>,
    requirepass: Option<String>,
    max_clients: usize,
    max_request_bytes: usize,
    max_memory_bytes: usize,
    max_query_buffers_bytes: usize,
    request_stall_timeout: Duration,
    appendonly: bool,
    dir: PathBuf,
    appendfsync: AppendFsync,
    cluster_node_timeout: Duration,
    cluster_repl_retry: Duration,
}

/// Default [`ServerConfig::with_cluster_node_timeout`]: 15 s, Disque's
/// `cluster-node-timeout` default.
pub const DEFAULT_CLUSTER_NODE_TIMEOUT: Duration = Duration::from_secs(15);
/// Default [`ServerConfig::with_cluster_repl_retry`]: 50 ms, Disque's
/// `DELAYED_JOB_ADD_NODE_MIN_PERIOD`.
pub const DEFAULT_CLUSTER_REPL_RETRY: Duration = Duration::from_millis(50);

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: DEFAULT_PORT,
            node_id: None,
            requirepass: None,
            max_clients: 10_000,
            max_request_bytes: 64 * 1024 * 1024,
            max_memory_bytes: 0,
            max_query_buffers_bytes: 256 * 1024 * 1024,
            request_stall_timeout: Duration::from_secs(10),
            appendonly: false,
            dir: PathBuf::from("."),
            appendfsync: AppendFsync::EverySec,
            cluster_node_timeout: DEFAULT_CLUSTER_NODE_TIMEOUT,
            cluster_repl_retry: DEFAULT_CLUSTER_REPL_RETRY,
        }
    }
}

impl ServerConfig {
    /// Address to listen on (default 127.0.0.1).
    pub fn with_bind(mut self, bind: IpAddr) -> Self {
        self.bind = bind;
        self
    }

    /// TCP port (default 7711; 0 picks any free port).
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Fixed node ID (40 hex chars); random when not set.
    pub fn with_node_id(mut self, id: String) -> Self {
        self.node_id = Some(id);
        self
    }

    /// Password required through AUTH before any other command.
    pub fn with_requirepass(mut self, pass: Option<String>) -> Self {
        self.requirepass = pass;
        self
    }

    /// Maximum number of simultaneous clients (default 10000).
    pub fn with_max_clients(mut self, n: usize) -> Self {
        self.max_clients = n;
        self
    }

    /// Maximum size of one request (default 64 MiB).
    pub fn with_max_request_bytes(mut self, n: usize) -> Self {
        self.max_request_bytes = n;
        self
    }

    /// Approximate memory for stored jobs past which ADDJOB is refused
    /// (0 = unlimited, the default).
    pub fn with_max_memory_bytes(mut self, n: usize) -> Self {
        self.max_memory_bytes = n;
        self
    }

    /// Limit on the input buffered by all clients together (default
    /// 256 MiB, raised to the request size limit plus 64 KiB when smaller;
    /// 0 = unlimited). A client whose partial request would take the total
    /// past it gets `-ERR Protocol error: ...` and is closed; a client
    /// holding at most 64 KiB of input is never refused.
    #[must_use]
    pub fn with_max_query_buffers_bytes(mut self, n: usize) -> Self {
        self.max_query_buffers_bytes = n;
        self
    }

    /// A client that stops sending in the middle of a request for this
    /// long is disconnected (default 10 s; zero = never). Idle clients
    /// between requests are not affected.
    #[must_use]
    pub fn with_request_stall_timeout(mut self, timeout: Duration) -> Self {
        self.request_stall_timeout = timeout;
        self
    }

    /// Keeps jobs in an append-only file in [`dir`](Self::with_dir) and
    /// loads them on start (default off). Standalone nodes only: an
    /// [`EmbeddedCluster`] ignores it.
    #[must_use]
    pub fn with_appendonly(mut self, on: bool) -> Self {
        self.appendonly = on;
        self
    }

    /// Data directory for the append-only file and the node id (default
    /// the current directory; created when missing).
    #[must_use]
    pub fn with_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = dir.into();
        self
    }

    /// When the append-only file is fsynced (default
    /// [`AppendFsync::EverySec`]).
    #[must_use]
    pub fn with_appendfsync(mut self, policy: AppendFsync) -> Self {
        self.appendfsync = policy;
        self
    }

    /// [`EmbeddedCluster`] only: how long a node that stopped answering
    /// ([`EmbeddedCluster::freeze`]) still looks healthy to the others
    /// (HELLO priority 1, picked as a replica) before they flag it failing
    /// (priority 10, no longer picked). Default 15 s
    /// ([`DEFAULT_CLUSTER_NODE_TIMEOUT`]), Disque's `cluster-node-timeout`.
    #[must_use]
    pub fn with_cluster_node_timeout(mut self, timeout: Duration) -> Self {
        self.cluster_node_timeout = timeout;
        self
    }

    /// [`EmbeddedCluster`] only: a synchronous ADDJOB whose replicas have
    /// not all confirmed asks one more node at the first cluster tick
    /// (every 100 ms, Disque's `hz 10`) at least this long after the last
    /// node was added, so it waits this long to one tick more (50–150 ms
    /// by default) for a silent replica. Default 50 ms
    /// ([`DEFAULT_CLUSTER_REPL_RETRY`]), Disque's
    /// `DELAYED_JOB_ADD_NODE_MIN_PERIOD`.
    #[must_use]
    pub fn with_cluster_repl_retry(mut self, interval: Duration) -> Self {
        self.cluster_repl_retry = interval;
        self
    }
}

/// A running server embedded in the current Tokio runtime.
///
/// Dropping it stops every task it spawned; [`EmbeddedDisque::shutdown`]
/// also waits for them.
#[derive(Debug)]
pub struct EmbeddedDisque {
    addr: SocketAddr,
    node: Arc<state::Node>,
    token: CancellationToken,
    tracker: TaskTracker,
    _guard: DropGuard,
}

fn normalize_node_id(id: &str) -> Result<String, Error> {
    if id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(id.to_ascii_lowercase())
    } else {
        Err(Error::InvalidNodeId(id.to_string()))
    }
}

/// Binds a listening socket.
pub(crate) async fn bind(want: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(want)
        .await
        .map_err(|source| Error::Bind { addr: want, source })
}

impl EmbeddedDisque {
    /// Binds the listener and starts serving.
    ///
    /// With [`ServerConfig::with_appendonly`], the append-only file is read
    /// first (a torn last record is dropped) and the node id is kept in the
    /// data directory.
    pub async fn start(config: ServerConfig) -> Result<EmbeddedDisque, Error> {
        let mut node_id = match &config.node_id {
            Some(id) => normalize_node_id(id)?,
            None => job::Rng::new().hex40(),
        };
        let mut opened = None;
        if config.appendonly {
            let dir = config.dir.clone();
            let configured = config.node_id.as_ref().map(|_| node_id.clone());
            let (id, log) = tokio::task::spawn_blocking(move || {
                let log = persist::load::open(&dir)?;
                let id = persist::node_id(&dir, configured.as_deref(), node_id)
                    .map_err(|source| Error::Persistence { path: dir, source })?;
                Ok::<_, Error>((id, log))
            })
            .await
            .map_err(|e| Error::Io(std::io::Error::other(e)))??;
            node_id = id;
            opened = Some(log);
        }
        let listener = bind(SocketAddr::new(config.bind, config.port)).await?;
        Self::launch_with(listener, &config, node_id, None, opened)
    }

    /// Starts serving on `listener`; with `cluster`, as a node of an
    /// [`EmbeddedCluster`] (its bus link and inbox).
    pub(crate) fn launch(
        listener: TcpListener,
        config: &ServerConfig,
        node_id: String,
        cluster: Option<(
            cluster::Link,
            tokio::sync::mpsc::UnboundedReceiver<cluster::Envelope>,
        )>,
    ) -> Result<EmbeddedDisque, Error> {
        Self::launch_with(listener, config, node_id, cluster, None)
    }

    fn launch_with(
        listener: TcpListener,
        config: &ServerConfig,
        node_id: String,
        cluster: Option<(
            cluster::Link,
            tokio::sync::mpsc::UnboundedReceiver<cluster::Envelope>,
        )>,
        opened: Option<persist::load::Opened>,
    ) -> Result<EmbeddedDisque, Error> {
        let addr = listener.local_addr()?;
        let (link, inbox) = match cluster {
            Some((link, rx)) => (Some(link), Some(rx)),
            None => (None, None),
        };
        let token = CancellationToken::new();
        let tracker = TaskTracker::new();
        let aof = opened.map(|o| {
            let log = Arc::new(persist::AofLog::new(
                config.dir.clone(),
                config.appendfsync,
                o.size,
            ));
            log.stats
                .loaded_jobs
                .store(o.jobs.len() as u64, std::sync::atomic::Ordering::Relaxed);
            log.stats
                .dropped_bytes
                .store(o.dropped, std::sync::atomic::Ordering::Relaxed);
            (log, o.file, o.jobs)
        });
        let node = Arc::new(state::Node::new(
            node_id,
            addr.port(),
            config,
            link,
            aof.as_ref().map(|(log, _, _)| log.clone()),
        ));
        if let Some((log, file, jobs)) = aof {
            node.store().restore(jobs, state::now());
            let token = token.clone();
            tracker.spawn_blocking(move || persist::writer::run(log, file, token));
        }
        tracker.spawn(timers::run(node.clone(), token.clone()));
        if let Some(rx) = inbox {
            tracker.spawn(cluster::run(node.clone(), rx, token.clone()));
        }
        tracker.spawn(server::accept_loop(
            listener,
            node.clone(),
            shutdown::Shutdown::new(token.clone()),
            tracker.clone(),
            config.max_clients.max(1),
        ));
        tracing::info!(%addr, node = %node.id, "disque server listening");
        Ok(EmbeddedDisque {
            addr,
            node,
            _guard: token.clone().drop_guard(),
            token,
            tracker,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// This node's 40-hex-char ID.
    pub fn node_id(&self) -> &str {
        &self.node.id
    }

    /// Stops accepting, closes every connection and waits for all tasks.
    pub async fn shutdown(self) {
        self.token.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_id_validation() {
        assert!(normalize_node_id(&"A".repeat(40)).is_ok());
        assert!(normalize_node_id("abc").is_err());
        assert!(normalize_node_id(&"g".repeat(40)).is_err());
    }
}
