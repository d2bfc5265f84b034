//! The behaviour suite on a three-node embedded Disque cluster (a fresh
//! one per test): replication, topic affinity and cluster-wide claims,
//! queue lengths and fan-out registries under the same promises as one
//! node.

use std::time::Duration;

use ezmq_conformance::{behaviour_suite, Broker};
use ezmq_test_support::TestCluster;

/// The lease of short-lease clients: Disque's shortest retry window.
const SHORT_LEASE: Duration = Duration::from_secs(1);

/// A three-node cluster for one test.
#[derive(Debug)]
struct DisqueCluster(TestCluster);

impl DisqueCluster {
    async fn start() -> DisqueCluster {
        DisqueCluster(TestCluster::start(3).await)
    }
}

#[async_trait::async_trait]
impl Broker for DisqueCluster {
    fn name(&self) -> &'static str {
        "disque"
    }

    fn expected_capabilities(&self) -> ezmq_core::spi::Capabilities {
        use ezmq_core::spi::{Capabilities, Capability};
        Capabilities::all().without(Capability::IdempotentPush)
    }

    fn url(&self) -> String {
        format!("disque://{}", self.0.addrs().join(","))
    }

    async fn connect(&self) -> ezmq_core::Result<ezmq_core::Client> {
        ezmq_disque::connect(self.0.config()).await
    }

    /// Every node restarts (empty: the embedded cluster keeps jobs in
    /// memory), on the same ports with the same ids.
    async fn restart(&self) -> Option<Result<(), String>> {
        for i in 0..3 {
            self.0.restart(i).await;
        }
        Some(Ok(()))
    }

    fn restart_keeps_messages(&self) -> bool {
        false
    }

    async fn connect_with_short_lease(&self) -> Option<ezmq_core::Result<ezmq_core::Client>> {
        Some(ezmq_disque::connect(self.0.config().with_default_retry(SHORT_LEASE)).await)
    }

    fn short_lease(&self) -> Duration {
        SHORT_LEASE
    }
}

behaviour_suite!(DisqueCluster::start().await);
