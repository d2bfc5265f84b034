//! The shared behaviour suite on RabbitMQ (`EZMQ_TEST_AMQP_URL`).

use ezmq_conformance::{behaviour_suite, Broker};
use ezmq_rabbitmq::RabbitConfig;

/// The RabbitMQ the tests use.
#[derive(Debug)]
struct Rabbit;

#[async_trait::async_trait]
impl Broker for Rabbit {
    fn name(&self) -> &'static str {
        "rabbitmq"
    }

    fn expected_capabilities(&self) -> ezmq_core::spi::Capabilities {
        use ezmq_core::spi::{Capabilities, Capability};
        Capabilities::none()
            .with(Capability::DelayedDelivery)
            .with(Capability::QueueStats)
            .with(Capability::ExclusiveClaim)
            .with(Capability::FanOut)
            .with(Capability::RequestReply)
            .with(Capability::RateLimit)
            .with(Capability::GlobalConcurrency)
            .with(Capability::Priorities)
            .with(Capability::RateLimitByKey)
    }

    fn url(&self) -> String {
        std::env::var("EZMQ_TEST_AMQP_URL")
            .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
    }

    async fn connect(&self) -> ezmq_core::Result<ezmq_core::Client> {
        ezmq_rabbitmq::connect(
            RabbitConfig::default()
                .with_url(self.url())
                .with_connect_timeout(std::time::Duration::from_secs(3)),
        )
        .await
    }

    /// Runs `EZMQ_TEST_AMQP_RESTART_CMD` when it is set.
    async fn restart(&self) -> Option<Result<(), String>> {
        let cmd = std::env::var("EZMQ_TEST_AMQP_RESTART_CMD").ok()?;
        let status = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .status()
            .await;
        Some(match status {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("{cmd:?} exited with {s}")),
            Err(e) => Err(format!("{cmd:?} failed: {e}")),
        })
    }
}

behaviour_suite!(Rabbit);
