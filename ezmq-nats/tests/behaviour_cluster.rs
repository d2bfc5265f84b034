//! The shared behaviour suite on a three-node JetStream cluster on
//! loopback (three private `nats-server` processes with routes, R3
//! streams), shared by the cases of this binary and stopped with it.

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use ezmq_conformance::{behaviour_suite, Broker};
use ezmq_core::spi::{Capabilities, Capability};
use ezmq_nats::NatsConfig;
use support::NatsCluster;

/// The cluster every case of this binary uses: `None` (after a skip
/// line) without `nats-server`.
fn cluster() -> Option<&'static NatsCluster> {
    static CLUSTER: OnceLock<Option<NatsCluster>> = OnceLock::new();
    CLUSTER.get_or_init(NatsCluster::start).as_ref()
}

/// The loopback cluster, or a URL that answers nothing when
/// `nats-server` is not installed (each case then skips, or fails when
/// NATS is required).
#[derive(Debug)]
struct ClusterNats {
    url: String,
}

impl ClusterNats {
    fn get() -> Self {
        let url = cluster().map_or_else(
            || format!("nats://127.0.0.1:{}", support::free_port()),
            NatsCluster::url,
        );
        ClusterNats { url }
    }

    fn config(&self) -> NatsConfig {
        NatsConfig::new(self.url.clone())
            .with_prefix("ezmq_cluster")
            .with_replicas(3)
            .with_connect_timeout(Duration::from_secs(2))
    }

    /// A client, retried while the nodes elect their JetStream leaders
    /// (only when a cluster runs: with none the first refusal is the
    /// answer).
    async fn client(&self, config: NatsConfig) -> ezmq_core::Result<ezmq_core::Client> {
        if cluster().is_none() {
            return ezmq_nats::connect(config).await;
        }
        support::connect_until_ready(config).await
    }
}

#[async_trait::async_trait]
impl Broker for ClusterNats {
    fn name(&self) -> &'static str {
        "nats"
    }

    /// As on one server: every capability but the job store.
    fn expected_capabilities(&self) -> Capabilities {
        Capabilities::all().without(Capability::JobStore)
    }

    fn url(&self) -> String {
        self.url.clone()
    }

    async fn connect(&self) -> ezmq_core::Result<ezmq_core::Client> {
        self.client(self.config()).await
    }

    async fn connect_with_short_lease(&self) -> Option<ezmq_core::Result<ezmq_core::Client>> {
        Some(
            self.client(self.config().with_lease(Duration::from_secs(1)))
                .await,
        )
    }
}

behaviour_suite!(super::ClusterNats::get());
