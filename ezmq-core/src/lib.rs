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

mod admin;
mod client;
mod consume_options;
mod error;
mod ext;
mod extensions;
mod handler;
mod headers;
mod hooks;
mod job;
pub mod job_meta;
mod listener;
mod listener_builder;
mod mq_client;
mod producer;
mod push_options;
pub mod spi;
pub mod telemetry;
mod topic;

pub use admin::Admin;
pub use client::{Client, ClientConfig};
pub use consume_options::{Backoff, ConsumeOptions, DeadLetter};
pub use error::{BoxError, ConnectFailure, Error, Result};
pub use ext::MqClientExt;
pub use handler::{handler_fn, json_handler, Handler, HandlerFn, Permanent};
pub use headers::{Headers, ATTEMPT_HEADER, MESSAGE_ID_HEADER, RESERVED_HEADER_PREFIX};
pub use hooks::{FailedAttempt, ListenerHooks};
pub use job::{Job, JobId};
pub use job_meta::JobMeta;
pub use listener::{DeadLetterRecord, ListenerHandle};
pub use listener_builder::ListenerBuilder;
pub use mq_client::MqClient;
pub use push_options::PushOptions;
pub use topic::{Topic, INTERNAL_PREFIX, INTERNAL_SEPARATOR, MAX_TOPIC_LEN};

pub use async_trait::async_trait;
pub use bytes::Bytes;
