//! A crash and restart of PostgreSQL under a listener (a private server,
//! so the shared one is not disturbed): the behaviour suite's restart case
//! — the listener resumes within 2 s of the server taking pushes again,
//! and a job confirmed before the crash is delivered after it.

mod support;

use std::time::Duration;

use ezmq_conformance::Broker;
use ezmq_postgres::PostgresConfig;
use support::PrivatePostgres;

/// The private server as the suite sees it.
#[derive(Debug)]
struct RestartablePostgres(PrivatePostgres);

#[async_trait::async_trait]
impl Broker for RestartablePostgres {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn expected_capabilities(&self) -> ezmq_core::spi::Capabilities {
        ezmq_core::spi::Capabilities::all()
    }

    fn url(&self) -> String {
        self.0.url()
    }

    async fn connect(&self) -> ezmq_core::Result<ezmq_core::Client> {
        ezmq_postgres::connect(
            PostgresConfig::new(self.0.url()).with_connect_timeout(Duration::from_secs(2)),
        )
        .await
    }

    async fn restart(&self) -> Option<Result<(), String>> {
        Some(self.0.restart())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn listeners_resume_after_a_crash_and_confirmed_jobs_survive() {
    let Some(server) = PrivatePostgres::start() else {
        return;
    };
    ezmq_conformance::run(
        RestartablePostgres(server),
        ezmq_conformance::cases::resumes_after_broker_restart,
    )
    .await;
}
