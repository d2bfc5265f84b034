//! Connections: one shared, multiplexed connection for ordinary commands
//! and a pool of dedicated connections for blocking reads.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionInfo, IntoConnectionInfo, Pipeline, RedisFuture,
    RedisResult, Value,
};

use crate::config::RedisConfig;
use crate::live::{LiveConnection, SharedConnection};

/// How much longer than its own block time a blocking command may take to
/// answer before its connection is given up.
pub(crate) const BLOCK_MARGIN: Duration = Duration::from_secs(2);

/// A connection to a single server or to a cluster; every command of this
/// backend goes through it. Cluster connections route each command (and
/// each pipeline, whose keys all share one hash tag) to the slot's owner
/// and follow `MOVED`/failovers themselves.
#[derive(Clone)]
pub(crate) enum Conn {
    /// The shared single-server connection (made again on first use
    /// after it died).
    Managed(SharedConnection),
    /// One single-server connection: dedicated, or the shared one's
    /// current connection.
    Single(LiveConnection),
    /// A cluster connection (shared or dedicated).
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Managed(c) => c.req_packed_command(cmd),
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Managed(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Managed(c) => c.get_db(),
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

impl Conn {
    /// The connection a push is sent on: for the shared single-server
    /// connection, its current one, made again first when it died. An
    /// error here means nothing was sent; an I/O error or a timeout on the
    /// connection returned means the push may have been stored.
    pub(crate) async fn for_push(&self) -> RedisResult<Conn> {
        match self {
            Conn::Managed(shared) => shared.live().await.map(Conn::Single),
            other => Ok(other.clone()),
        }
    }

    /// Closes the shared single-server connection (see
    /// [`SharedConnection::close`]); a cluster connection closes when its
    /// last handle is dropped.
    pub(crate) fn close(&self) {
        if let Conn::Managed(shared) = self {
            shared.close();
        }
    }

    /// For a connection in the idle pool: false once it is known dead.
    fn is_alive(&self) -> bool {
        match self {
            Conn::Single(live) => live.is_alive(),
            Conn::Managed(_) | Conn::Cluster(_) => true,
        }
    }
}

/// Opens connections of either kind.
pub(crate) enum Connector {
    /// A single server.
    Single(Box<ConnectionInfo>),
    /// A cluster: one client for shared connections, one (with longer
    /// response timeouts) for dedicated blocking ones.
    Cluster {
        shared: Box<ClusterClient>,
        blocking: Box<ClusterClient>,
    },
}

impl Connector {
    /// Validates the URLs (nothing is connected yet).
    pub(crate) fn new(config: &RedisConfig) -> RedisResult<Self> {
        if config.cluster {
            let build = |response: Duration| {
                ClusterClientBuilder::new(config.urls.clone())
                    .connection_timeout(config.connect_timeout)
                    .response_timeout(response)
                    .build()
            };
            Ok(Connector::Cluster {
                shared: Box::new(build(config.command_timeout)?),
                blocking: Box::new(build(config.command_timeout + BLOCK_MARGIN)?),
            })
        } else {
            let url = config.urls.first().map(String::as_str).unwrap_or_default();
            Ok(Connector::Single(Box::new(url.into_connection_info()?)))
        }
    }

    /// The shared connection (multiplexed; never used for blocking reads).
    pub(crate) async fn shared(&self, config: &RedisConfig) -> RedisResult<Conn> {
        match self {
            Connector::Single(info) => {
                let settings =
                    AsyncConnectionConfig::new().set_response_timeout(Some(config.command_timeout));
                SharedConnection::connect((**info).clone(), settings, config.connect_timeout)
                    .await
                    .map(Conn::Managed)
            }
            Connector::Cluster { shared, .. } => {
                shared.get_async_connection().await.map(Conn::Cluster)
            }
        }
    }

    /// A new dedicated connection for blocking commands.
    pub(crate) async fn dedicated(&self, config: &RedisConfig) -> RedisResult<Conn> {
        match self {
            Connector::Single(info) => {
                let settings = AsyncConnectionConfig::new()
                    .set_response_timeout(Some(config.command_timeout + BLOCK_MARGIN));
                LiveConnection::open(info, &settings, config.connect_timeout)
                    .await
                    .map(Conn::Single)
            }
            Connector::Cluster { blocking, .. } => {
                blocking.get_async_connection().await.map(Conn::Cluster)
            }
        }
    }
}

/// Idle dedicated connections, each used by one blocking command at a time.
/// A connection whose command failed or was cancelled is dropped, never
/// returned.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<Vec<Conn>>,
}

/// Most idle dedicated connections kept.
const MAX_IDLE: usize = 64;

impl Pool {
    /// An idle connection that is still alive, if any (dead ones, say
    /// after a server restart, are dropped).
    pub(crate) fn take(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().ok()?;
        while let Some(conn) = idle.pop() {
            if conn.is_alive() {
                return Some(conn);
            }
        }
        None
    }

    /// Gives a healthy connection back.
    pub(crate) fn put(&self, conn: Conn) {
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < MAX_IDLE {
                idle.push(conn);
            }
        }
    }

    /// Drops every idle connection.
    pub(crate) fn clear(&self) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.clear();
        }
    }
}
