//! Shared helpers for ezmq integration tests.
//!
//! [`TestBroker::start`] gives a Disque to test against: the external nodes
//! named by `EZMQ_TEST_DISQUE_ADDRS` (comma separated, e.g. a real Disque
//! cluster) or else an embedded server on `127.0.0.1:0`.
//!
//! ```no_run
//! # async fn demo() {
//! use ezmq_test_support::{init_tracing, TestBroker};
//! use ezmq_disque::MqClient;
//!
//! init_tracing();
//! let broker = TestBroker::start().await;
//! let client = broker.client().await;
//! let topic = broker.unique_topic("orders");
//! client.push(&topic, "x".into()).await.unwrap();
//! # }
//! ```
//!
//! [`MemoryBroker`] is an in-memory broker implementing the whole backend
//! SPI (leases, delays, every optional ability), for tests of the
//! listener runtime and the features without any broker; the behaviour
//! suite runs on it (`tests/behaviour_memory.rs`).

mod bare;
mod brokers;
mod capture;
mod child;
pub mod memory;
mod proxy;
pub use bare::{assert_unsupported, BareBackend};
pub use brokers::{
    amqp_url, broker_required, free_port, kafka_url, nats_url, postgres_url, redis_url,
    skip_or_require, REQUIRE_ENV,
};
pub use capture::{assert_hidden, LogCapture};
pub use child::KillOnDrop;
pub use memory::{MemoryBackend, MemoryBroker, MemoryConfig, MemoryError, MEMORY_BACKEND_NAME};
pub use proxy::StallingProxy;

use std::future::Future;
use std::sync::Once;
use std::time::Duration;

use ezmq_disque::{DisqueClient, DisqueConfig};
use ezmq_disque_server::{EmbeddedCluster, EmbeddedDisque, ServerConfig};
use rand::Rng;
use tokio::sync::Mutex;

/// The environment variable naming external Disque nodes to test against
/// (`host:port,host:port`).
pub const ADDRS_ENV: &str = "EZMQ_TEST_DISQUE_ADDRS";

/// A Disque for one test: external (from [`ADDRS_ENV`]) or embedded.
#[derive(Debug)]
pub struct TestBroker {
    addrs: Vec<String>,
    /// The embedded server's node id, kept across restarts (a real Disque
    /// keeps its id in `nodes.conf`).
    node_id: Option<String>,
    /// The embedded server, `None` for external nodes (or while it
    /// restarts).
    embedded: Option<Mutex<Option<EmbeddedDisque>>>,
}

impl TestBroker {
    /// Points at [`ADDRS_ENV`] when it is set, otherwise starts an embedded
    /// server on a free local port. Panics when the server cannot start (a
    /// test helper, not library code).
    pub async fn start() -> TestBroker {
        if let Some(addrs) = external_addrs() {
            return TestBroker {
                addrs,
                node_id: None,
                embedded: None,
            };
        }
        let server = EmbeddedDisque::start(ServerConfig::default().with_port(0))
            .await
            .expect("start the embedded Disque server");
        TestBroker {
            addrs: vec![server.addr().to_string()],
            node_id: Some(server.node_id().to_owned()),
            embedded: Some(Mutex::new(Some(server))),
        }
    }

    /// The node addresses (`host:port`).
    pub fn addrs(&self) -> Vec<String> {
        self.addrs.clone()
    }

    /// A client configuration with the seeds set and short timeouts suited
    /// to tests.
    pub fn config(&self) -> DisqueConfig {
        DisqueConfig::default()
            .with_seeds(self.addrs.clone())
            .with_connect_timeout(Duration::from_secs(2))
            .with_refresh_interval(Duration::from_secs(1))
    }

    /// A connected client. Panics when connecting fails.
    pub async fn client(&self) -> DisqueClient {
        ezmq_disque::connect(self.config())
            .await
            .expect("connect to the test broker")
    }

    /// True for the embedded server.
    pub fn is_embedded(&self) -> bool {
        self.embedded.is_some()
    }

    /// How much earlier than its nominal time a timed event (a delay ending,
    /// a TTL expiring) may happen on this broker. Zero for the embedded
    /// server, whose timers run on the exact clock. Real Disque computes
    /// due times from a clock it caches every 100 ms and keeps expiry times
    /// in whole seconds rounded down, so a delay can end up to ~100 ms
    /// early and a TTL can run out up to 1 s early; tests asserting a lower
    /// bound subtract this.
    pub fn clock_slack(&self) -> Duration {
        if self.is_embedded() {
            Duration::ZERO
        } else {
            Duration::from_millis(1_100)
        }
    }

    /// Shuts the embedded server down and starts a new one on the same
    /// port with the same node id (all jobs are lost: the server is in
    /// memory). Panics for an
    /// external broker; check [`TestBroker::is_embedded`] first (or use
    /// [`skip_unless_embedded!`]).
    pub async fn restart(&self) {
        self.stop().await;
        self.start_again().await;
    }

    /// Shuts the embedded server down (for tests of an unreachable server);
    /// [`TestBroker::start_again`] brings it back on the same port.
    pub async fn stop(&self) {
        let slot = self
            .embedded
            .as_ref()
            .expect("restart needs the embedded server");
        if let Some(server) = slot.lock().await.take() {
            server.shutdown().await;
        }
    }

    /// Starts the embedded server again on its old port, retrying while the
    /// port is still being released.
    pub async fn start_again(&self) {
        let slot = self
            .embedded
            .as_ref()
            .expect("restart needs the embedded server");
        let mut guard = slot.lock().await;
        if guard.is_some() {
            return;
        }
        let port = self.addrs[0]
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .expect("embedded address has a port");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let mut config = ServerConfig::default().with_port(port);
            if let Some(id) = &self.node_id {
                config = config.with_node_id(id.clone());
            }
            match EmbeddedDisque::start(config).await {
                Ok(server) => {
                    *guard = Some(server);
                    return;
                }
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(cause = %e, port, "port not free yet, retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("restart the embedded Disque on port {port}: {e}"),
            }
        }
    }

    /// `prefix` plus a random suffix, so tests can share a server.
    pub fn unique_topic(&self, prefix: &str) -> String {
        unique_topic(prefix)
    }
}

/// An embedded multi-node Disque cluster for one test
/// ([`ezmq_disque_server::EmbeddedCluster`]): `n` nodes in this process, each
/// on its own free port, with kill / restart / partition / freeze hooks.
///
/// ```no_run
/// # async fn demo() {
/// use ezmq_test_support::TestCluster;
/// use ezmq_disque::MqClient;
///
/// let cluster = TestCluster::start(3).await;
/// let client = cluster.client().await; // seeded with every node
/// let topic = cluster.unique_topic("orders");
/// client.push(&topic, "x".into()).await.unwrap();
/// cluster.kill(0).await;       // its port closes, its jobs are lost
/// cluster.restart(0).await;    // back empty, same port and node id
/// # }
/// ```
#[derive(Debug)]
pub struct TestCluster {
    cluster: EmbeddedCluster,
}

impl TestCluster {
    /// Starts `n` embedded nodes on free local ports. Panics when they
    /// cannot start (a test helper, not library code).
    pub async fn start(n: usize) -> TestCluster {
        let cluster = EmbeddedCluster::start(n)
            .await
            .expect("start the embedded Disque cluster");
        TestCluster { cluster }
    }

    /// Starts `n` embedded nodes with `config` (its port is ignored: each
    /// node gets a free port), e.g. a short
    /// [`ServerConfig::with_cluster_node_timeout`] for tests of
    /// [`TestCluster::freeze`]. Panics when they cannot start.
    pub async fn start_with(n: usize, config: ServerConfig) -> TestCluster {
        let cluster = EmbeddedCluster::start_with(n, config.with_port(0))
            .await
            .expect("start the embedded Disque cluster");
        TestCluster { cluster }
    }

    /// The underlying cluster (node ids, partitions, ...).
    pub fn cluster(&self) -> &EmbeddedCluster {
        &self.cluster
    }

    /// Every node's address (`host:port`), in node order.
    pub fn addrs(&self) -> Vec<String> {
        self.cluster.addrs().iter().map(|a| a.to_string()).collect()
    }

    /// Node `i`'s address (`host:port`).
    pub fn addr(&self, i: usize) -> String {
        self.cluster.node(i).addr.to_string()
    }

    /// Node `i`'s id.
    pub fn node_id(&self, i: usize) -> String {
        self.cluster.node(i).node_id
    }

    /// A client configuration seeded with every node, with short timeouts
    /// suited to tests.
    pub fn config(&self) -> DisqueConfig {
        self.config_seeded(&self.addrs())
    }

    /// Like [`TestCluster::config`] but seeded with the given addresses only
    /// (the rest of the cluster is learned with HELLO).
    pub fn config_seeded(&self, seeds: &[String]) -> DisqueConfig {
        DisqueConfig::default()
            .with_seeds(seeds.to_vec())
            .with_connect_timeout(Duration::from_secs(2))
            .with_command_timeout(Duration::from_secs(3))
            .with_refresh_interval(Duration::from_millis(500))
            .with_retry_backoff(Duration::from_millis(50))
    }

    /// A connected client seeded with every node. Panics when connecting
    /// fails.
    pub async fn client(&self) -> DisqueClient {
        ezmq_disque::connect(self.config())
            .await
            .expect("connect to the test cluster")
    }

    /// A connected client seeded with node `i` only.
    pub async fn client_seeded(&self, i: usize) -> DisqueClient {
        ezmq_disque::connect(self.config_seeded(&[self.addr(i)]))
            .await
            .expect("connect to the test cluster")
    }

    /// Kills node `i`: its port closes and its jobs are lost.
    pub async fn kill(&self, i: usize) {
        self.cluster.kill(i).await;
    }

    /// Restarts node `i` empty, on the same port with the same node id.
    /// Panics when the port cannot be bound again within 10 s.
    pub async fn restart(&self, i: usize) {
        self.cluster
            .restart(i)
            .await
            .expect("restart the cluster node");
    }

    /// Cuts node `i` off from the other nodes (it keeps serving clients).
    pub fn partition(&self, i: usize) {
        self.cluster.partition(i);
    }

    /// Reconnects a partitioned node.
    pub fn heal(&self, i: usize) {
        self.cluster.heal(i);
    }

    /// Freezes node `i` as a real Disque node under `SIGSTOP`
    /// ([`EmbeddedCluster::freeze`]): it accepts connections and answers
    /// nothing, and the other nodes still pick it as a replica (a
    /// synchronous ADDJOB on them waits 50–150 ms for it, then replicates
    /// elsewhere) until the node timeout (default 15 s) flags it failing.
    pub fn freeze(&self, i: usize) {
        self.cluster.freeze(i);
    }

    /// Thaws a frozen node: it handles what it was sent meanwhile, in
    /// order ([`EmbeddedCluster::thaw`]).
    pub fn thaw(&self, i: usize) {
        self.cluster.thaw(i);
    }

    /// `prefix` plus a random suffix.
    pub fn unique_topic(&self, prefix: &str) -> String {
        unique_topic(prefix)
    }

    /// Stops every node and waits for their tasks (dropping also stops them).
    pub async fn shutdown(self) {
        self.cluster.shutdown().await;
    }
}

/// The external nodes named by [`ADDRS_ENV`], if it is set and not empty.
pub fn external_addrs() -> Option<Vec<String>> {
    let list = std::env::var(ADDRS_ENV).ok()?;
    let addrs: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect();
    (!addrs.is_empty()).then_some(addrs)
}

/// `prefix` plus a random suffix (`prefix-1a2b3c4d5e6f`).
pub fn unique_topic(prefix: &str) -> String {
    let n: u64 = rand::rng().random();
    format!("{prefix}-{n:016x}")
}

/// Installs a `tracing` subscriber writing through the test harness
/// (filtered by `RUST_LOG`, default `warn`); only the first call does
/// anything.
pub fn init_tracing() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    });
}

/// Polls `condition` every 20 ms until it is true (returns `true`) or
/// `timeout` passes (returns `false`). Only for states that have no event
/// to await.
///
/// ```no_run
/// # async fn demo(client: ezmq_disque::DisqueClient) {
/// use std::time::Duration;
/// use ezmq_disque::MqClient;
/// use ezmq_test_support::eventually;
///
/// let drained = eventually(Duration::from_secs(10), || {
///     let client = client.clone();
///     async move { client.queue_len("jobs").await.ok() == Some(0) }
/// })
/// .await;
/// assert!(drained);
/// # }
/// ```
pub async fn eventually<F, Fut>(timeout: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Returns early from a test (printing a `SKIP` line) unless the broker is
/// the embedded server: `skip_unless_embedded!(broker)`, or
/// `skip_unless_embedded!()` before a broker exists (checks
/// [`ADDRS_ENV`]).
///
/// ```no_run
/// # async fn demo() {
/// use ezmq_test_support::{skip_unless_embedded, TestBroker};
///
/// skip_unless_embedded!();
/// let broker = TestBroker::start().await;
/// skip_unless_embedded!(broker);
/// broker.restart().await;
/// # }
/// ```
#[macro_export]
macro_rules! skip_unless_embedded {
    () => {
        if $crate::external_addrs().is_some() {
            eprintln!("SKIP {}: needs the embedded Disque server", module_path!());
            return;
        }
    };
    ($broker:expr) => {
        if !$broker.is_embedded() {
            eprintln!("SKIP {}: needs the embedded Disque server", module_path!());
            return;
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_unique_and_valid() {
        let a = unique_topic("t");
        let b = unique_topic("t");
        assert_ne!(a, b);
        assert!(ezmq_disque::Topic::new(a).is_ok());
    }

    #[tokio::test]
    async fn eventually_times_out() {
        assert!(!eventually(Duration::from_millis(50), || async { false }).await);
        assert!(eventually(Duration::from_millis(50), || async { true }).await);
    }
}
