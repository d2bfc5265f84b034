//! # ezmq-core
//!
//! The backend-independent heart of ezmq: the [`MqClient`] trait, the
//! [`Backend`] SPI that broker crates implement, jobs, options, errors and
//! the consume-listener runtime (auto-ACK, retries with backoff, dead
//! letters, concurrency limit, heartbeats, graceful shutdown).
//!
//! Most users depend on a backend crate such as `ezmq-disque`, which
//! re-exports what they need from here.

mod backend;
mod client;
mod consume_options;
mod error;
mod ext;
mod extensions;
mod handler;
mod job;
mod listener;
mod mq_client;
mod push_options;
mod topic;

pub use backend::{Backend, ExclusiveClaim};
pub use client::{Client, ClientConfig};
pub use consume_options::{Backoff, ConsumeOptions, DeadLetter};
pub use error::{BoxError, Error, Result};
pub use ext::MqClientExt;
pub use handler::{handler_fn, json_handler, Handler, HandlerFn, Permanent};
pub use job::{Job, JobId};
pub use listener::{DeadLetterRecord, ListenerHandle};
pub use mq_client::MqClient;
pub use push_options::PushOptions;
pub use topic::{Topic, INTERNAL_PREFIX, INTERNAL_SEPARATOR, MAX_TOPIC_LEN};

pub use async_trait::async_trait;
pub use bytes::Bytes;
