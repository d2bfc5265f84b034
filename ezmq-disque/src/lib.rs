//! # ezmq-disque
//!
//! The [Disque](https://github.com/antirez/disque) backend of ezmq: connect
//! with [`connect`] (or [`connect_url`]) and use the returned
//! [`DisqueClient`] through [`MqClient`] and [`MqClientExt`]. Everything of
//! `ezmq-core` is re-exported, so this is the only dependency you need.
//!
//! ```no_run
//! # async fn demo() -> ezmq_disque::Result<()> {
//! use std::time::Duration;
//! use ezmq_disque::{DisqueConfig, MqClient, MqClientExt};
//!
//! let client = ezmq_disque::connect(DisqueConfig::default()).await?;
//! client
//!     .add_consume_listener("emails", |job| async move {
//!         println!("got {:?}", job.body());
//!         Ok::<(), std::io::Error>(())
//!     })
//!     .await?;
//! client.push("emails", "hello".into()).await?;
//! client.shutdown(Duration::from_secs(5)).await?;
//! # Ok(()) }
//! ```
//!
//! See the crate README for the configuration defaults and how multi-node
//! clusters are handled (topic affinity, acknowledgements, queue lengths).

mod addjob;
mod backend;
mod batch;
mod claim;
mod claim_set;
mod commands;
mod config;
mod connect_failure;
mod delivery;
mod error;
mod fan_out;
mod health;
mod health_report;
mod job_store;
mod mux;
mod node;
mod push_options;
mod reply;
mod resp;
mod spi_impl;
mod url_options;

pub use backend::DisqueBackend;
pub use config::{DisqueConfig, DEFAULT_PORT};
pub use error::DisqueError;
pub use push_options::DisquePushOptions;

pub use ezmq_core::*;

/// Compiles the README's example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// An ezmq client over Disque.
///
/// ```no_run
/// # async fn demo() -> ezmq_disque::Result<()> {
/// use ezmq_disque::{DisqueClient, MqClient};
///
/// let client: DisqueClient = ezmq_disque::connect_url("disque://127.0.0.1:7711").await?;
/// client.push("jobs", "payload".into()).await?;
/// # Ok(()) }
/// ```
///
/// An alias of [`Client`]: the client type is the same
/// whatever the broker.
pub type DisqueClient = ezmq_core::Client;

/// Connects to Disque and returns a client with the default
/// [`ClientConfig`].
///
/// Fails with [`Error::Connect`] (naming the seed addresses) when no seed
/// answers, and with [`Error::InvalidOption`] for a bad configuration.
///
/// ```no_run
/// # async fn demo() -> ezmq_disque::Result<()> {
/// use ezmq_disque::DisqueConfig;
///
/// let client = ezmq_disque::connect(
///     DisqueConfig::default().with_seeds(["10.0.0.1:7711", "10.0.0.2:7711"]),
/// ).await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn connect(config: DisqueConfig) -> Result<DisqueClient> {
    let backend = DisqueBackend::connect(config).await?;
    Ok(DisqueClient::new(backend, ClientConfig::default()))
}

/// Connects with a URL `disque://[:password@]host:port[,host2:port2...]`
/// (see [`DisqueConfig`]'s `FromStr`); every other setting keeps its
/// default.
///
/// ```no_run
/// # async fn demo() -> ezmq_disque::Result<()> {
/// let client = ezmq_disque::connect_url("disque://:s3cret@10.0.0.1:7711,10.0.0.2:7711").await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn connect_url(url: &str) -> Result<DisqueClient> {
    let config: DisqueConfig = url.parse()?;
    connect(config).await
}
