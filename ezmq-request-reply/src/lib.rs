//! # ezmq-request-reply
//!
//! Request-reply (RPC) for ezmq: a caller sends a request to a topic and
//! waits for one reply; any client with a reply listener on that topic
//! answers it. Bring [`RequestReplyExt`] into scope; it works on every
//! [`MqClient`](ezmq_core::MqClient) (also `Arc<dyn MqClient>`) whose
//! backend reports
//! [`Capability::RequestReply`](ezmq_core::spi::Capability::RequestReply)
//! (private reply inboxes), and fails at once with
//! [`Error::Unsupported`](ezmq_core::Error::Unsupported) elsewhere.
//!
//! ```no_run
//! # async fn demo(worker: ezmq_core::Client, caller: ezmq_core::Client) -> ezmq_core::Result<()> {
//! use std::time::Duration;
//! use ezmq_request_reply::RequestReplyExt;
//!
//! worker.add_reply_listener("echo", |req| async move {
//!     Ok::<_, std::io::Error>(req.into_body())
//! }).await?;
//!
//! let reply = caller.request("echo", "ping".into(), Duration::from_secs(2)).await?;
//! assert_eq!(&reply.body()[..], b"ping");
//! # Ok(()) }
//! ```
//!
//! ## How it works
//!
//! - Each client instance (shared by its clones) opens one private inbox
//!   with the backend's [`ReplyChannel`](ezmq_core::spi::ReplyChannel) at
//!   its first request, and runs one background receiver on it that hands
//!   each reply to the caller waiting for its correlation id. (Disque: a
//!   queue `__ezmq|reply|<random>`; Redis: a list; RabbitMQ: an exclusive
//!   reply queue.)
//! - A request is an ordinary message on the request topic: the raw body
//!   plus the headers `correlation-id`, `reply-to` (the inbox address) and
//!   `deadline-ms` (caller's clock, Unix milliseconds). Workers answer with
//!   `ReplyChannel::send_reply`. See the `envelope` module docs for the
//!   reply format.
//!
//! ## Guarantees
//!
//! - **Every caller gets its own reply or an error**: replies are routed by
//!   correlation id, never by order; a reply whose caller gave up (late
//!   reply) is dropped, never delivered to a later request.
//! - **Timeouts**: after `timeout` the caller gets
//!   [`Error::NoReply`](ezmq_core::Error::NoReply). The deadline travels with
//!   the request: a worker that takes an expired request drops it without
//!   running the handler; the broker drops it once its TTL (the timeout
//!   rounded up to whole seconds) has passed; a reply is sent at most once
//!   with a TTL of the time left.
//! - **At-most-once requests by default**: reply listeners acknowledge a
//!   request before running it, so it is never redelivered and a caller
//!   that timed out and tries again does not get the side effects twice
//!   through a hidden redelivery. Opt into redelivery (the worker died) with
//!   [`ReplyListenerOptions::with_at_least_once`]; handlers must then be
//!   idempotent.
//! - **Remote errors**: a handler's error or panic reaches the caller as
//!   [`Error::Remote`](ezmq_core::Error::Remote) with the message.
//! - **Shutdown**: a caller whose client shuts down gets
//!   [`Error::Shutdown`](ezmq_core::Error::Shutdown) at once, and so do new
//!   requests.
//! - Deadlines compare clocks of different machines: keep them in sync
//!   (NTP); skew shortens or lengthens the time a worker grants a request.

mod envelope;
mod ext;
#[doc(hidden)]
pub mod fuzzing;
mod message;
mod options;
mod router;
mod telemetry;
mod worker;

pub use envelope::EnvelopeError;
pub use ext::RequestReplyExt;
pub use message::{Reply, Request};
pub use options::{ReplyListenerOptions, RequestOptions};
pub use uuid::Uuid;
