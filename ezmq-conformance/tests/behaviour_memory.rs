//! The behaviour suite on the in-memory backend: a fresh broker per test,
//! every client a connection to it; a restart is a short outage
//! ([`MemoryBroker::stop`], then [`MemoryBroker::start`]).

use std::time::Duration;

use ezmq_conformance::{behaviour_suite, Broker};
use ezmq_core::{Client, ClientConfig};
use ezmq_test_support::{MemoryBroker, MemoryConfig, MEMORY_BACKEND_NAME};

/// How long a restart keeps the broker down.
const DOWNTIME: Duration = Duration::from_millis(300);

/// The lease of short-lease clients.
const SHORT_LEASE: Duration = Duration::from_secs(1);

/// One in-memory broker for one test.
#[derive(Debug, Default)]
struct Memory(MemoryBroker);

#[async_trait::async_trait]
impl Broker for Memory {
    fn name(&self) -> &'static str {
        MEMORY_BACKEND_NAME
    }

    fn expected_capabilities(&self) -> ezmq_core::spi::Capabilities {
        use ezmq_core::spi::Capabilities;
        Capabilities::all()
    }

    fn url(&self) -> String {
        "memory://".into()
    }

    async fn connect(&self) -> ezmq_core::Result<Client> {
        Ok(Client::new(self.0.backend(), ClientConfig::default()))
    }

    /// Down for [`DOWNTIME`] (calls fail, retryably), then back with
    /// every message.
    async fn restart(&self) -> Option<Result<(), String>> {
        self.0.stop();
        // The outage itself: nothing to await, its length is the point.
        tokio::time::sleep(DOWNTIME).await;
        self.0.start();
        Some(Ok(()))
    }

    async fn connect_with_short_lease(&self) -> Option<ezmq_core::Result<Client>> {
        let backend = self
            .0
            .backend_with(MemoryConfig::default().with_lease(SHORT_LEASE));
        Some(Ok(Client::new(backend, ClientConfig::default())))
    }

    fn short_lease(&self) -> Duration {
        SHORT_LEASE
    }
}

behaviour_suite!(Memory::default());
