//! # ezmq-core
//!
//! The backend-independent heart of ezmq: the [`MqClient`] trait, the
//! [`spi`] that broker crates implement (a small [`spi::Backend`] plus
//! capability traits), jobs, options, errors and
//! the consume-listener runtime (auto-ACK, retries with backoff, dead
//! letters, concurrency limit, heartbeats, graceful shutdown).
//!
//! Most users depend on a backend crate such as `ezmq-disque`, which
//! re-exports what they need from here.
//!
//! ## The job model
//!
//! Every push gets a [`JobId`] before it reaches the broker — the
//! producer's own ([`PushOptions::with_message_id`]) or a UUIDv7, sortable
//! by creation time — and a [`JobMeta`] (attempt, its own attempt limit
//! and backoff, when it was pushed and scheduled), written once by core
//! into reserved `ezmq-` headers ([`job_meta`]). Backends store headers as
//! they are and deliver them back, so one job keeps one id through delay,
//! retry, dead letter and requeue on every broker; the behaviour suite
//! checks it on each.
//!
//! ## One producer pipeline
//!
//! A push, a delayed push, a batch ([`MqClient::push_batch`]), a
//! broadcast, a dead letter, a requeue and a request all take the same
//! steps: validate (open client, payload limit, options, capabilities) →
//! stamp the id and metadata → `send` span, trace context and metrics →
//! the backend ([`spi::Backend::publish`], [`spi::Backend::publish_batch`]
//! or [`spi::FanOut::publish_to_groups`]). What later features add to every
//! push goes in there once.
//!
//! ## One admission step
//!
//! A listener fetches only what its admission step lets through: nothing
//! while it is paused ([`ListenerHandle::pause`]; the backend gives back
//! what it prefetched), then at most its free concurrency slots, then the
//! limits shared across processes — a global concurrency slot per job
//! ([`ConsumeOptions::with_global_concurrency`]) and a rate-limit token per
//! start ([`ConsumeOptions::with_rate_limit`]) — before a fetch, never
//! inside a handler that holds a job whose lease runs. After the handler, one retry
//! decision (outcome, attempt, the listener's policy with the job's own
//! overrides) settles the job.
//!
//! ## Typed access to a backend
//!
//! [`Client`] is one type over `Arc<dyn Backend>`. A call only one broker
//! has (PostgreSQL's push inside the caller's transaction) is an extension
//! trait in that backend's crate: it reaches its backend with
//! [`Runtime::backend_as`](spi::Runtime::backend_as), validates with
//! [`Runtime::check_push`](spi::Runtime::check_push) and stamps with
//! [`JobMeta::stamp`], so the job it writes is like any other. Tools use
//! [`MqClient::admin`].

mod admin;
mod client;
mod consume_options;
mod dead_letter_admin;
mod error;
mod ext;
mod extensions;
mod flow;
mod flow_status;
mod handler;
mod headers;
mod health;
mod hooks;
mod job;
mod job_id_gen;
pub mod job_meta;
mod lane_mark;
mod listener;
mod listener_builder;
mod mq_client;
pub mod presence;
mod priority;
mod producer;
mod push_options;
mod rate_key;
mod rate_limit;
pub mod spi;
pub mod telemetry;
mod topic;
pub mod unique;

pub use admin::Admin;
pub use client::{Client, ClientConfig};
pub use consume_options::{Backoff, ConsumeOptions, DeadLetter};
pub use dead_letter_admin::{DeadLetterSelection, DrainReport};
pub use error::{BoxError, ConnectFailure, Error, Result};
pub use ext::MqClientExt;
pub use flow_status::{FlowLimits, FlowStatus};
pub use handler::{handler_fn, json_handler, Handler, HandlerFn, Permanent};
pub use headers::{
    Headers, HeadersIter, ATTEMPT_HEADER, MESSAGE_ID_HEADER, RESERVED_HEADER_PREFIX,
};
pub use health::{BrokerHealth, NodeHealth};
pub use hooks::{FailedAttempt, ListenerHooks};
pub use job::{Job, JobId};
pub use job_meta::JobMeta;
pub use listener::{DeadLetterRecord, ListenerHandle};
pub use listener_builder::ListenerBuilder;
pub use mq_client::MqClient;
pub use priority::{Priority, PRIORITY_HEADER};
pub use push_options::PushOptions;
pub use rate_key::{KeyedRateLimit, RateKey};
pub use rate_limit::RateLimit;
pub use topic::{Topic, INTERNAL_PREFIX, INTERNAL_SEPARATOR, MAX_TOPIC_LEN};
pub use unique::UniqueKey;

pub use async_trait::async_trait;
pub use bytes::Bytes;
