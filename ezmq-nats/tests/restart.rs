//! A crash and restart of a private NATS server under a listener: the
//! behaviour suite's restart case — the listener resumes within 2 s of
//! the server taking pushes again, and a job confirmed before the crash
//! (stored in the server's file store) is delivered after it.

mod support;

use std::time::Duration;

use ezmq_conformance::Broker;
use ezmq_core::spi::{Capabilities, Capability};
use ezmq_nats::NatsConfig;
use support::NatsNode;

/// The private server as the suite sees it.
#[derive(Debug)]
struct RestartableNats(NatsNode);

#[async_trait::async_trait]
impl Broker for RestartableNats {
    fn name(&self) -> &'static str {
        "nats"
    }

    fn expected_capabilities(&self) -> Capabilities {
        Capabilities::all().without(Capability::JobStore)
    }

    fn url(&self) -> String {
        self.0.url()
    }

    async fn connect(&self) -> ezmq_core::Result<ezmq_core::Client> {
        support::connect_until_ready(
            NatsConfig::new(self.0.url()).with_connect_timeout(Duration::from_secs(2)),
        )
        .await
    }

    async fn restart(&self) -> Option<Result<(), String>> {
        Some(self.0.restart())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn listeners_resume_after_a_crash_and_confirmed_jobs_survive() {
    let Some(server) = support::single() else {
        return;
    };
    ezmq_conformance::run(
        RestartableNats(server),
        ezmq_conformance::cases::resumes_after_broker_restart,
    )
    .await;
}
