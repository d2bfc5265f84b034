//! The shared behaviour suite against the NATS server at
//! EZMQ_TEST_NATS_URL (default nats://127.0.0.1:4222), with the prefix
//! `ezmq_test`.

use std::time::Duration;

use ezmq_conformance::{behaviour_suite, Broker};
use ezmq_core::spi::{Capabilities, Capability};
use ezmq_nats::NatsConfig;
use ezmq_test_support::nats_url as url;

/// The shared NATS server.
#[derive(Debug)]
struct SharedNats;

impl SharedNats {
    fn config(&self) -> NatsConfig {
        NatsConfig::new(url())
            .with_prefix("ezmq_test")
            .with_connect_timeout(Duration::from_secs(2))
    }
}

#[async_trait::async_trait]
impl Broker for SharedNats {
    fn name(&self) -> &'static str {
        "nats"
    }

    /// Every capability but the job store (not built yet on NATS: see the
    /// crate README).
    fn expected_capabilities(&self) -> Capabilities {
        Capabilities::all().without(Capability::JobStore)
    }

    fn url(&self) -> String {
        url()
    }

    async fn connect(&self) -> ezmq_core::Result<ezmq_core::Client> {
        ezmq_nats::connect(self.config()).await
    }

    async fn connect_with_short_lease(&self) -> Option<ezmq_core::Result<ezmq_core::Client>> {
        Some(ezmq_nats::connect(self.config().with_lease(Duration::from_secs(1))).await)
    }
}

behaviour_suite!(super::SharedNats);
