//! # ezmq-postgres
//!
//! The PostgreSQL backend of ezmq (`postgres://` or `postgresql://`
//! URLs): jobs are rows of one table in a schema of ezmq's own, fetched
//! with `FOR UPDATE SKIP LOCKED` in batches, with waiting listeners woken
//! by `LISTEN`/`NOTIFY`. Every ezmq feature works: push and delayed push,
//! consume listeners with leases, retries and dead letters, queue length
//! and peek, jobs by id and state (cancel, promote, reschedule),
//! distributed cron and unique jobs (claims), broadcast groups and
//! request-reply — on the same database as the service's own tables.
//!
//! ```no_run
//! # async fn demo() -> ezmq_core::Result<()> {
//! use std::time::Duration;
//! use ezmq_core::{Job, MqClient, MqClientExt};
//!
//! let client = ezmq_postgres::connect_url("postgres://127.0.0.1:5432/test").await?;
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
//! The crate README states what each feature guarantees on PostgreSQL
//! (the schema and its migrations, leases, delay lateness, the
//! message-id window, what the sweep removes).

mod backend;
mod claim;
mod config;
mod connect_failure;
mod error;
mod fan_out;
mod health;
mod in_transaction;
mod job_store;
mod push;
mod queue;
mod receive;
mod reply;
mod schema;
mod settle;
mod sql;
mod stats;
mod sweep;
mod wake;

pub use backend::PostgresBackend;
pub use config::{PostgresConfig, DEFAULT_URL};
pub use error::PostgresBackendError;
pub use in_transaction::{push_batch_in_tx, push_in_tx, push_json_in_tx};

use ezmq_core::{Client, ClientConfig, Result};

/// Connects to PostgreSQL (creating or migrating the schema) and returns
/// a client with the default [`ClientConfig`].
///
/// Fails with [`Error::Connect`](ezmq_core::Error::Connect) (naming the
/// URL, password redacted) when PostgreSQL does not answer or refuses the
/// login or the database, and with
/// [`Error::InvalidOption`](ezmq_core::Error::InvalidOption) for a bad
/// configuration.
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// use std::time::Duration;
/// use ezmq_postgres::PostgresConfig;
///
/// let client = ezmq_postgres::connect(
///     PostgresConfig::new("postgres://127.0.0.1/app").with_lease(Duration::from_secs(60)),
/// )
/// .await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn connect(config: PostgresConfig) -> Result<Client> {
    let backend = PostgresBackend::connect(config).await?;
    Ok(Client::new(backend, ClientConfig::default()))
}

/// Connects with a URL, `postgres://[user[:password]@]host[:port]/database`
/// with settings in its query string (`?prefix=jobs&lease=60s`, the
/// names of [`PostgresConfig::OPTIONS`]).
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// let client = ezmq_postgres::connect_url("postgres://app@10.0.0.5/orders?prefix=jobs").await?;
/// # let _ = client; Ok(()) }
/// ```
pub async fn connect_url(url: &str) -> Result<Client> {
    connect(url.parse()?).await
}
