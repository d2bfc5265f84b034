//! # ezmq-kafka
//!
//! The Kafka backend of ezmq (`kafka://` URLs), built in the milestones
//! of its proposal (`docs/proposals/kafka.md`): a topic's jobs are the
//! records of one Kafka topic (created through the admin API), read by
//! one consumer group that every listening process joins. Jobs of a
//! partition run concurrently; each partition commits its lowest
//! unfinished offset, so a killed process's successor runs again only its
//! unfinished jobs and those finished within one commit interval. Retries
//! run in place (the record stays uncommitted until it succeeds or is
//! dead-lettered). Delayed pushes go through delay-level topics; claims
//! (cron, unique keys, pauses, limits, priorities) are records of a claim
//! log; broadcast groups and request-reply run on it too; and
//! [`KafkaPushOptions::with_key`] gives a key's jobs one at a time, in
//! order.
//!
//! ```no_run
//! # async fn demo() -> ezmq_core::Result<()> {
//! use std::time::Duration;
//! use ezmq_core::{Job, MqClient, MqClientExt};
//!
//! let client = ezmq_kafka::connect_url("kafka://127.0.0.1:9092").await?;
//! client
//!     .add_consume_listener("emails", |job: Job| async move {
//!         println!("got {:?}", job.body());
//!         Ok::<(), std::io::Error>(())
//!     })
//!     .await?;
//! client.push("emails", "hello".into()).await?;
//! client.shutdown(Duration::from_secs(5)).await?;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod backend;
mod background;
mod claims;
mod cluster;
mod config;
mod consumer;
mod delay;
mod fan_out;
mod health;
mod names;
mod push;
mod push_options;
mod reply;
mod settle;
mod stats;

pub use backend::KafkaBackend;
pub use cluster::KafkaCluster;
pub use config::{KafkaConfig, DEFAULT_URL};
pub use push_options::KafkaPushOptions;

use ezmq_core::{Client, ClientConfig, Result};

/// Connects to Kafka and returns a client with the default
/// [`ClientConfig`].
///
/// Fails with [`Error::Connect`](ezmq_core::Error::Connect) (naming the
/// URL) when no broker answers, and with
/// [`Error::InvalidOption`](ezmq_core::Error::InvalidOption) for a bad
/// configuration.
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// use std::time::Duration;
/// use ezmq_kafka::KafkaConfig;
///
/// let client = ezmq_kafka::connect(
///     KafkaConfig::new("kafka://127.0.0.1:9092").with_session_timeout(Duration::from_secs(6)),
/// )
/// .await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn connect(config: KafkaConfig) -> Result<Client> {
    let backend = KafkaBackend::connect(config).await?;
    Ok(Client::new(backend, ClientConfig::default()))
}

/// Connects with a URL, `kafka://host:port[,host:port…]` with settings
/// in its query string (`?prefix=jobs&partitions=12`, the names of
/// [`KafkaConfig::OPTIONS`]).
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// let client = ezmq_kafka::connect_url("kafka://127.0.0.1:9092?partitions=3").await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn connect_url(url: &str) -> Result<Client> {
    connect(url.parse()?).await
}
