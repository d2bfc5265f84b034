//! # ezmq-nats
//!
//! The NATS JetStream backend of ezmq (`nats://` URLs): every topic's
//! jobs are messages of one work-queue stream (a subject per topic), read
//! by a durable pull consumer per topic with explicit acknowledgements;
//! delayed jobs wait in a second stream until a mover publishes them
//! when due; claims (distributed cron, unique keys, limits) are keys of a
//! key-value bucket; broadcast groups are durable consumers of a stream
//! with interest retention; request-reply uses core NATS inboxes.
//!
//! ```no_run
//! # async fn demo() -> ezmq_core::Result<()> {
//! use std::time::Duration;
//! use ezmq_core::{Job, MqClient, MqClientExt};
//!
//! let client = ezmq_nats::connect_url("nats://127.0.0.1:4222").await?;
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
//!
//! The crate README states what each feature guarantees on NATS (the
//! streams, leases, delay lateness, the message-id window, claims and
//! clocks).

mod backend;
mod claim;
mod config;
mod connect_failure;
mod durable;
mod error;
mod fan_out;
mod health;
mod mover;
mod names;
mod push;
mod receive;
mod reply;
mod settle;
mod stats;
mod streams;

pub use backend::NatsBackend;
pub use config::{NatsConfig, DEFAULT_URL};
pub use error::NatsBackendError;

use ezmq_core::{Client, ClientConfig, Result};

/// Connects to NATS (creating ezmq's streams and bucket where they are
/// missing) and returns a client with the default [`ClientConfig`].
///
/// Fails with [`Error::Connect`](ezmq_core::Error::Connect) (naming the
/// URL, password redacted) when no server answers, refuses the login or
/// has no JetStream, and with
/// [`Error::InvalidOption`](ezmq_core::Error::InvalidOption) for a bad
/// configuration.
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// use std::time::Duration;
/// use ezmq_nats::NatsConfig;
///
/// let client = ezmq_nats::connect(
///     NatsConfig::new("nats://127.0.0.1:4222").with_lease(Duration::from_secs(60)),
/// )
/// .await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn connect(config: NatsConfig) -> Result<Client> {
    let backend = NatsBackend::connect(config).await?;
    Ok(Client::new(backend, ClientConfig::default()))
}

/// Connects with a URL, `nats://[user:password@]host:port[,host:port…]`
/// with settings in its query string (`?prefix=jobs&lease=60s`, the
/// names of [`NatsConfig::OPTIONS`]).
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// let client = ezmq_nats::connect_url("nats://10.0.0.5:4222,10.0.0.6:4222?replicas=3").await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn connect_url(url: &str) -> Result<Client> {
    connect(url.parse()?).await
}
