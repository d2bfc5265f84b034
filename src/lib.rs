//! # ezmq
//!
//! One easy, trait-based messaging API for Rust services — push, delayed
//! push, consume listeners, distributed cron, broadcast groups and
//! request-reply — over real brokers: Disque, Redis and RabbitMQ, picked by
//! the URL given to [`connect_url`]. An embedded Disque-compatible server
//! (`ezmq::server`, feature `embedded`) runs the same code in one process
//! with nothing to install.
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
//!
//! Import the [`prelude`]: it brings every trait the methods below belong
//! to. Every call returns [`Result`]; [`Error`] says what went wrong and
//! whether a retry can help ([`Error::is_retryable`]).
//!
//! ## What to call
//!
//! | To | Call | Tune with |
//! |---|---|---|
//! | connect | [`connect_url`], or [`Config`] (a URL, connect retry, the environment's `EZMQ_URL`) | [`ClientConfig`] (payload limit) |
//! | push a job | [`push`](MqClient::push), [`push_json`](MqClientExt::push_json); each returns the job's [`JobId`] | [`push_with`](MqClient::push_with) and [`PushOptions`]: headers, TTL, message id |
//! | push for later | [`push_delay`](MqClient::push_delay), [`push_json_delay`](MqClientExt::push_json_delay) | [`PushOptions::with_delay`] |
//! | push many at once | [`push_batch`](MqClient::push_batch), [`push_json_batch`](MqClientExt::push_json_batch): one result per job | |
//! | consume | [`listener(topic)`](MqClientExt::listener) then [`run`](ListenerBuilder::run) or [`json`](ListenerBuilder::json); shorthands [`add_consume_listener`](MqClientExt::add_consume_listener), [`add_json_listener`](MqClientExt::add_json_listener) | [`ConsumeOptions`]: concurrency, timeouts, at-most-once |
//! | retry, then dead-letter | a handler's `Err` or panic retries; [`Permanent`] skips the retries; failed jobs land on `<topic>.dead-letter` as a [`DeadLetterRecord`] | [`ConsumeOptions::with_max_attempts`], [`with_backoff`](ConsumeOptions::with_backoff), [`with_dead_letter`](ConsumeOptions::with_dead_letter) ([`DeadLetter`]); per job [`PushOptions::with_max_attempts`], [`without_retry`](PushOptions::without_retry); alerts: [`ListenerHooks`] |
//! | run on a schedule | [`add_crontab`](crontab::CrontabExt::add_crontab): each tick once across every process | [`CrontabOptions`](crontab::CrontabOptions): time zone, missed ticks, overlap |
//! | fan out to groups | [`add_broadcast_listener`](broadcast::BroadcastExt::add_broadcast_listener), [`push_broadcast`](broadcast::BroadcastExt::push_broadcast) (a [`BroadcastReceipt`](broadcast::BroadcastReceipt)) | [`BroadcastConfig`](broadcast::BroadcastConfig): retention |
//! | request-reply | [`request`](request_reply::RequestReplyExt::request), [`request_json`](request_reply::RequestReplyExt::request_json); workers [`add_reply_listener`](request_reply::RequestReplyExt::add_reply_listener) | [`RequestOptions`](request_reply::RequestOptions), [`ReplyListenerOptions`](request_reply::ReplyListenerOptions) |
//! | pause a listener | [`ListenerHandle::pause`], [`resume`](ListenerHandle::resume) | |
//! | inspect and operate | [`admin()`](MqClient::admin): queue lengths, in-flight counts, peek, groups, this client's listeners, the job store | |
//! | stop | [`shutdown`](MqClient::shutdown): running handlers finish within the grace period, the rest goes back to the broker | |
//! | observe | spans and metrics, their names: [`telemetry`] | cargo feature `opentelemetry` |
//!
//! A feature the broker cannot support fails when it is registered, with
//! [`Error::Unsupported`]; [`capabilities()`](MqClient::capabilities) says
//! what the connected broker has.
//!
//! ## Backends and their guarantees
//!
//! The URL's scheme picks the backend. Each module introduces its broker;
//! its crate README states what every feature guarantees there
//! (durability, leases, how late a delay can be, when a job can come
//! twice):
//!
//! - [`disque`]: `disque://` — Disque, or the embedded server
//!   (`ezmq-disque/README.md`);
//! - [`redis`]: `redis://`, `redis+cluster://` — Redis Streams, single
//!   server or Cluster (`ezmq-redis/README.md`);
//! - [`rabbitmq`]: `amqp://` (`amqps://` with the crate's `tls` feature) —
//!   RabbitMQ, quorum queues (`ezmq-rabbitmq/README.md`);
//! - [`postgres`]: `postgres://`, `postgresql://` — PostgreSQL, jobs in a
//!   table of ezmq's own schema (`ezmq-postgres/README.md`);
//! - [`nats`]: `nats://` — NATS JetStream, a work-queue stream with a
//!   durable pull consumer per topic (`ezmq-nats/README.md`);
//! - `kafka`: `kafka://` — Kafka, a topic and a consumer group per ezmq
//!   topic; being built (`ezmq-kafka/README.md` says what works today).
//!
//! Cargo features: `disque`, `redis`, `rabbitmq`, `postgres`, `nats` (the backends, on by
//! default: turn off the ones a service does not use), `kafka` (off by
//! default: it compiles librdkafka), `embedded` (the
//! server, off by default) and `opentelemetry` (W3C trace context in
//! message headers, so consumer spans join the producer's trace; off by
//! default).
//!
//! ## The crates behind it
//!
//! This crate re-exports the others, so it is the only dependency a
//! service needs: the core (traits, jobs, the listener runtime, the
//! backend [`spi`]) at its root, the backends, [`crontab`], [`broadcast`]
//! and [`request_reply`] as modules.

mod config;
mod connect;
mod settings;

pub use config::{Config, COMMON_OPTIONS, CONNECT_RETRY_ENV, URL_ENV};
pub use connect::{connect_url, SCHEMES};
#[doc(inline)]
pub use ezmq_core::*;

/// The Disque backend: configuration, connection, node discovery.
#[cfg(feature = "disque")]
#[doc(inline)]
pub use ezmq_disque as disque;

/// The Redis backend (Streams): configuration and connection.
#[cfg(feature = "redis")]
#[doc(inline)]
pub use ezmq_redis as redis;

/// The RabbitMQ backend (AMQP 0-9-1): configuration and connection.
#[cfg(feature = "rabbitmq")]
#[doc(inline)]
pub use ezmq_rabbitmq as rabbitmq;

/// The NATS JetStream backend: configuration and connection.
#[cfg(feature = "nats")]
#[doc(inline)]
pub use ezmq_nats as nats;

/// The Kafka backend: configuration and connection.
#[cfg(feature = "kafka")]
#[doc(inline)]
pub use ezmq_kafka as kafka;

/// The PostgreSQL backend: configuration and connection.
#[cfg(feature = "postgres")]
#[doc(inline)]
pub use ezmq_postgres as postgres;

/// Distributed cron: each tick runs once across every process.
#[doc(inline)]
pub use ezmq_crontab as crontab;

/// Fan-out by group: every group gets each message, one member per group.
#[doc(inline)]
pub use ezmq_broadcast as broadcast;

/// Request-reply over queues.
#[doc(inline)]
pub use ezmq_request_reply as request_reply;

/// The web dashboard: an axum router to mount (`dashboard` feature).
#[cfg(feature = "dashboard")]
#[doc(inline)]
pub use ezmq_dashboard as dashboard;

/// The embedded Disque-compatible server.
#[cfg(feature = "embedded")]
#[doc(inline)]
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

/// The code of docs/jobs.md, compiled as doctests.
#[doc = include_str!("../docs/jobs.md")]
#[cfg(doctest)]
pub struct JobsDoctests;

/// The code of docs/flow-control.md, compiled as doctests.
#[doc = include_str!("../docs/flow-control.md")]
#[cfg(doctest)]
pub struct FlowControlDoctests;

/// The code of docs/configuration.md, compiled as doctests.
#[doc = include_str!("../docs/configuration.md")]
#[cfg(doctest)]
pub struct ConfigurationDoctests;

/// The code of docs/errors.md, compiled as doctests.
#[doc = include_str!("../docs/errors.md")]
#[cfg(doctest)]
pub struct ErrorsDoctests;

/// The code of docs/observability.md (its start-up code needs an exporter
/// of the reader's choice, so it is marked `ignore`).
#[doc = include_str!("../docs/observability.md")]
#[cfg(doctest)]
pub struct ObservabilityDoctests;
