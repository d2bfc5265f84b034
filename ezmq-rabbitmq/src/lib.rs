//! # ezmq-rabbitmq
//!
//! The RabbitMQ backend of ezmq (AMQP 0-9-1 over [`lapin`](https://docs.rs/lapin), on tokio):
//! connect with [`connect`] or [`connect_url`] and use the returned
//! [`Client`] through [`MqClient`](ezmq_core::MqClient).
//!
//! ```no_run
//! # async fn demo() -> ezmq_core::Result<()> {
//! use std::time::Duration;
//! use ezmq_core::{MqClient, MqClientExt};
//!
//! let client = ezmq_rabbitmq::connect_url("amqp://guest:guest@127.0.0.1:5672/%2f").await?;
//! client.push("emails", "hello".into()).await?;
//! client.shutdown(Duration::from_secs(5)).await?;
//! # Ok(()) }
//! ```
//!
//! Pushes return once the broker confirmed them; queues are durable quorum
//! queues and messages persistent by default; delays go through binary
//! delay levels (no plugin needed). The crate README describes the
//! topology and what each feature guarantees on RabbitMQ.

mod backend;
mod batch;
mod claim;
mod config;
mod connect_failure;
mod consumer;
mod declared;
mod delivery;
mod error;
mod fan_out;
mod health;
mod hold;
mod idle;
mod names;
mod prefetch;
mod presence;
mod publish;
mod reply;
mod session;
mod stats;
mod topology;
mod url_options;

pub use backend::RabbitBackend;
pub use config::{QueueType, RabbitConfig, DEFAULT_URL};
pub use error::RabbitError;
pub use fan_out::DELAYED_BROADCAST;

use ezmq_core::{Client, ClientConfig, Result};

/// The backend's name in errors and spans.
pub const BACKEND_NAME: &str = "rabbitmq";

/// Connects to RabbitMQ and returns a client with the default
/// [`ClientConfig`].
///
/// Fails with [`Error::Connect`](ezmq_core::Error::Connect) when the broker
/// does not answer, and with
/// [`Error::InvalidOption`](ezmq_core::Error::InvalidOption) for a bad
/// configuration.
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// use ezmq_rabbitmq::{QueueType, RabbitConfig};
///
/// let client = ezmq_rabbitmq::connect(
///     RabbitConfig::default().with_queue_type(QueueType::Classic),
/// ).await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn connect(config: RabbitConfig) -> Result<Client> {
    let backend = RabbitBackend::connect(config).await?;
    Ok(Client::new(backend, ClientConfig::default()))
}

/// Connects with a URL `amqp://user:pass@host:5672/vhost` (vhost
/// URL-encoded, `%2f` for `/`); every other setting keeps its default.
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// let client = ezmq_rabbitmq::connect_url("amqp://guest:guest@127.0.0.1:5672/%2f").await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn connect_url(url: &str) -> Result<Client> {
    connect(url.parse()?).await
}

/// Compiles the README's example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
