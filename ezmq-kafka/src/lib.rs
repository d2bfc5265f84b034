//! The Kafka backend of ezmq, milestone M0 of
//! [its proposal](https://example.invalid/ezmq/docs/proposals/kafka.md):
//! the configuration (`kafka://` URLs), a checked connection, and the
//! topics ezmq names and creates. It is not a backend yet: no job runs on
//! it until M1, and `ezmq::connect_url` does not take `kafka://`.
//!
//! ```no_run
//! use ezmq_kafka::{KafkaCluster, KafkaConfig};
//!
//! # async fn run() -> ezmq_core::Result<()> {
//! let config: KafkaConfig = "kafka://127.0.0.1:9092?partitions=3".parse()?;
//! let cluster = KafkaCluster::connect(config).await?;
//! println!("{} broker(s)", cluster.broker_count());
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod cluster;
mod config;
mod names;

pub use cluster::KafkaCluster;
pub use config::{KafkaConfig, DEFAULT_URL};
