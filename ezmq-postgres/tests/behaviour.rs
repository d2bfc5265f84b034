//! The shared behaviour suite against the PostgreSQL at
//! EZMQ_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test),
//! in the schema `ezmq_test`.

use std::time::Duration;

use ezmq_conformance::{behaviour_suite, Broker};
use ezmq_postgres::PostgresConfig;
use ezmq_test_support::postgres_url as url;

/// The shared PostgreSQL.
#[derive(Debug)]
struct SharedPostgres;

impl SharedPostgres {
    fn config(&self) -> PostgresConfig {
        PostgresConfig::new(url())
            .with_schema("ezmq_test")
            .with_connect_timeout(Duration::from_secs(2))
    }
}

#[async_trait::async_trait]
impl Broker for SharedPostgres {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn expected_capabilities(&self) -> ezmq_core::spi::Capabilities {
        ezmq_core::spi::Capabilities::all()
    }

    fn url(&self) -> String {
        url()
    }

    async fn connect(&self) -> ezmq_core::Result<ezmq_core::Client> {
        ezmq_postgres::connect(self.config()).await
    }

    async fn connect_with_short_lease(&self) -> Option<ezmq_core::Result<ezmq_core::Client>> {
        Some(ezmq_postgres::connect(self.config().with_lease(Duration::from_secs(1))).await)
    }
}

behaviour_suite!(super::SharedPostgres);
