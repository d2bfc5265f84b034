//! The shared behaviour suite against the Redis at EZMQ_TEST_REDIS_URL
//! (default redis://127.0.0.1:6379). That server is shared, so the
//! restart case is left to `behaviour_private.rs`.

mod support;

use std::time::Duration;

use ezmq_conformance::{behaviour_suite, Broker};
use ezmq_redis::RedisConfig;

/// The shared Redis.
#[derive(Debug)]
struct SharedRedis;

impl SharedRedis {
    fn config(&self) -> RedisConfig {
        RedisConfig::new(support::redis_url()).with_connect_timeout(Duration::from_secs(2))
    }
}

#[async_trait::async_trait]
impl Broker for SharedRedis {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn expected_capabilities(&self) -> ezmq_core::spi::Capabilities {
        ezmq_core::spi::Capabilities::all()
    }

    fn url(&self) -> String {
        support::redis_url()
    }

    async fn connect(&self) -> ezmq_core::Result<ezmq_core::Client> {
        ezmq_redis::connect(self.config()).await
    }

    async fn connect_with_short_lease(&self) -> Option<ezmq_core::Result<ezmq_core::Client>> {
        Some(
            ezmq_redis::connect(
                self.config()
                    .with_lease(Duration::from_secs(1))
                    .with_reclaim_interval(Duration::from_millis(100)),
            )
            .await,
        )
    }
}

behaviour_suite!(super::SharedRedis);
