//! The behaviour suite on Disque: the embedded server (a fresh one per
//! test), or the real nodes named by `EZMQ_TEST_DISQUE_ADDRS`.

use std::time::Duration;

use ezmq_conformance::{behaviour_suite, Broker};
use ezmq_test_support::TestBroker;

/// The lease of short-lease clients: Disque's shortest retry window.
const SHORT_LEASE: Duration = Duration::from_secs(1);

/// A Disque for one test.
#[derive(Debug)]
struct Disque(TestBroker);

impl Disque {
    async fn start() -> Disque {
        Disque(TestBroker::start().await)
    }
}

#[async_trait::async_trait]
impl Broker for Disque {
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

    async fn restart(&self) -> Option<Result<(), String>> {
        if !self.0.is_embedded() {
            return None;
        }
        self.0.restart().await;
        Some(Ok(()))
    }

    /// The embedded server keeps its jobs in memory only.
    fn restart_keeps_messages(&self) -> bool {
        !self.0.is_embedded()
    }

    async fn connect_with_short_lease(&self) -> Option<ezmq_core::Result<ezmq_core::Client>> {
        Some(ezmq_disque::connect(self.0.config().with_default_retry(SHORT_LEASE)).await)
    }

    fn short_lease(&self) -> Duration {
        SHORT_LEASE
    }

    fn clock_slack(&self) -> Duration {
        self.0.clock_slack()
    }
}

behaviour_suite!(Disque::start().await);
