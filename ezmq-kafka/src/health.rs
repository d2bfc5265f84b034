//! The broker's health report ([`Backend::health`](ezmq_core::spi::Backend::health)):
//! one metadata request, its brokers listed by id.

use ezmq_core::{BrokerHealth, NodeHealth, Result};

use crate::backend::KafkaBackend;

impl KafkaBackend {
    /// `Kafka` with how many brokers and topics the cluster's metadata
    /// lists and which broker answered; one node per broker, named
    /// `broker <id>` (never its host and port), up: the metadata lists
    /// the brokers the cluster has alive. A metadata request that fails
    /// is one node, `cluster`, down. The metadata carries no version
    /// and, through librdkafka, no controller id.
    pub(crate) async fn health_report(&self) -> Result<BrokerHealth> {
        self.ensure_open()?;
        let health = BrokerHealth::new("Kafka");
        let metadata = match self.cluster().metadata().await {
            Ok(metadata) => metadata,
            Err(_) => return Ok(health.with_node(NodeHealth::down("cluster"))),
        };
        let mut ids: Vec<i32> = metadata.brokers().iter().map(|b| b.id()).collect();
        ids.sort_unstable();
        let mut health = health
            .with_fact("brokers", ids.len())
            .with_fact("topics", metadata.topics().len())
            .with_fact(
                "answered by",
                format!("broker {}", metadata.orig_broker_id()),
            );
        for id in ids {
            health = health.with_node(NodeHealth::up(format!("broker {id}")));
        }
        Ok(health)
    }
}
