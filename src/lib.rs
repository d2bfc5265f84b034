//! # ezmq
//!
//! One easy, trait-based messaging API for Rust services — push, delayed
//! push, consume listeners, distributed cron, broadcast groups and
//! request-reply — over real brokers: Disque, Redis and RabbitMQ, picked by
//! the URL given to [`connect_url`]. An embedded Disque-compatible server
//! (`ezmq::server`, feature `embedded`) runs the same code in one process
//! with nothing to install.
//!
//! Cargo features: `disque`, `redis`, `rabbitmq` (the backends, on by
//! default: turn off the ones a service does not use), `embedded` (the
//! server, off by default) and `opentelemetry` (W3C trace context in
//! message headers, so consumer spans join the producer's trace; off by
//! default). Spans, metrics and their names: [`telemetry`].
//!
//! This crate gathers the parts: [`ezmq_core`] (traits, jobs, listener
//! runtime, the backend SPI), the backends, [`crontab`], [`broadcast`] and
//! [`request_reply`]. Import the [`prelude`] to get every extension trait.
//!
//! ```no_run
//! use std::time::Duration;
//! use ezmq::prelude::*;
//!
//! # #[tokio::main] async fn main() -> ezmq::Result<()> {
//! let client = ezmq::connect_url("disque://127.0.0.1:7711").await?;
//! client
//!     .add_consume_listener("emails", |job: ezmq::Job| async move {
//!         println!("sending {:?}", job.body());
//!         Ok::<(), std::io::Error>(())
//!     })
//!     .await?;
//! client.push("emails", "hello".into()).await?;
//! client.shutdown(Duration::from_secs(5)).await?;
//! # Ok(()) }
//! ```

mod config;
mod connect;
mod settings;

pub use config::{Config, COMMON_OPTIONS, CONNECT_RETRY_ENV, URL_ENV};
pub use connect::{connect_url, SCHEMES};
pub use ezmq_core::*;

/// The Disque backend: configuration, connection, node discovery.
#[cfg(feature = "disque")]
pub use ezmq_disque as disque;

/// The Redis backend (Streams): configuration and connection.
#[cfg(feature = "redis")]
pub use ezmq_redis as redis;

/// The RabbitMQ backend (AMQP 0-9-1): configuration and connection.
#[cfg(feature = "rabbitmq")]
pub use ezmq_rabbitmq as rabbitmq;

/// Distributed cron: each tick runs once across every process.
pub use ezmq_crontab as crontab;

/// Fan-out by group: every group gets each message, one member per group.
pub use ezmq_broadcast as broadcast;

/// Request-reply over queues.
pub use ezmq_request_reply as request_reply;

/// The embedded Disque-compatible server.
#[cfg(feature = "embedded")]
pub use ezmq_disque_server as server;

/// Every trait needed to call ezmq methods: `use ezmq::prelude::*;`.
pub mod prelude {
    pub use ezmq_broadcast::BroadcastExt;
    pub use ezmq_core::{MqClient, MqClientExt};
    pub use ezmq_crontab::CrontabExt;
    pub use ezmq_request_reply::RequestReplyExt;
}

/// The README's code, compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
