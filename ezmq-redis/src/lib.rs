//! # ezmq-redis
//!
//! The Redis backend of ezmq, on Redis Streams: a single server
//! (`redis://[:password@]host:port[/db]`) or a Redis Cluster
//! (`redis+cluster://host:port,host:port`). Every ezmq feature works:
//! push and delayed push, consume listeners with leases, retries and dead
//! letters, queue length and peek, distributed cron (exclusive claims),
//! broadcast groups (one consumer group per group) and request-reply
//! (inbox lists).
//!
//! ```no_run
//! # async fn demo() -> ezmq_core::Result<()> {
//! use std::time::Duration;
//! use ezmq_core::{Job, MqClient, MqClientExt};
//!
//! let client = ezmq_redis::connect_url("redis://127.0.0.1:6379").await?;
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
//! The crate README states what each feature guarantees on Redis
//! (durability with and without AOF or `WAIT`, leases, delay lateness,
//! broadcast retention, claims across failovers, queue-length semantics).

mod backend;
mod claim;
mod codec;
mod config;
mod conn;
mod error;
mod fan_out;
mod handshake;
mod health;
mod job_store;
mod keys;
mod live;
mod push;
mod rate_limiter;
mod receive;
mod reply;
mod scripts;
mod settle;
mod source;
mod stats;
mod url_options;

pub use backend::RedisBackend;
pub use config::{RedisConfig, DEFAULT_URL};
pub use error::RedisBackendError;

use ezmq_core::{Client, ClientConfig, Result};

/// Connects to Redis and returns a client with the default
/// [`ClientConfig`].
///
/// Fails with [`Error::Connect`](ezmq_core::Error::Connect) (naming the
/// URLs) when Redis does not answer, and with
/// [`Error::InvalidOption`](ezmq_core::Error::InvalidOption) for a bad
/// configuration.
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// use std::time::Duration;
/// use ezmq_redis::RedisConfig;
///
/// let client = ezmq_redis::connect(
///     RedisConfig::new("redis://127.0.0.1:6379").with_lease(Duration::from_secs(60)),
/// )
/// .await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn connect(config: RedisConfig) -> Result<Client> {
    let backend = RedisBackend::connect(config).await?;
    Ok(Client::new(backend, ClientConfig::default()))
}

/// Connects with a URL, `redis://[:password@]host:port[/db]` or
/// `redis+cluster://[:password@]host:port,host:port`; every other setting
/// keeps its default (see [`RedisConfig`]).
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// let client = ezmq_redis::connect_url("redis+cluster://10.0.0.1:7000,10.0.0.2:7000").await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn connect_url(url: &str) -> Result<Client> {
    connect(url.parse()?).await
}
