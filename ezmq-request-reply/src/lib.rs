//! # ezmq-request-reply
//!
//! Request-reply (RPC) over ezmq queues, for every backend: a caller sends
//! a request to a topic and waits for one reply; any client with a reply
//! listener on that topic answers it. Bring [`RequestReplyExt`] into scope.
//!
//! ```no_run
//! # async fn demo(worker: ezmq_core::Client<impl ezmq_core::Backend>,
//! #               caller: ezmq_core::Client<impl ezmq_core::Backend>) -> ezmq_core::Result<()> {
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
//! - Each client instance (shared by its clones) has a private reply queue
//!   `__ezmq|reply|<uuid v4>` that never collides with a user topic, and one
//!   background receiver on it, started by the first request. The receiver
//!   takes up to 64 replies per fetch, ACKs them at once and hands each to
//!   the caller waiting for its correlation id.
//! - A request carries a fresh correlation id (UUID v4), the reply queue and
//!   its deadline (caller's clock, Unix milliseconds) in a one-line JSON
//!   header, followed by the raw body (binary safe, about 130 bytes of
//!   overhead). See the `envelope` module docs for the format.
//!
//! ## Guarantees
//!
//! - **Every caller gets its own reply or an error**: replies are routed by
//!   correlation id, never by order; a reply whose caller gave up (late
//!   reply) is dropped, never delivered to a later request.
//! - **Timeouts**: after `timeout` the caller gets
//!   [`Error::Timeout`](ezmq_core::Error::Timeout). The deadline travels with
//!   the request: a worker that takes an expired request drops it without
//!   running the handler; the broker drops it once its TTL (the timeout
//!   rounded up to whole seconds) has passed; a reply is pushed at most once
//!   with a TTL of the time left.
//! - **At-most-once requests by default**: a request is never redelivered,
//!   so a caller that timed out and tries again does not get the side
//!   effects twice through a hidden redelivery. Opt into redelivery (the
//!   worker died) with [`RequestOptions::with_at_least_once`]; handlers must
//!   then be idempotent.
//! - **Remote errors**: a handler's error or panic reaches the caller as
//!   [`Error::Remote`](ezmq_core::Error::Remote) with the message.
//! - **Shutdown**: a caller whose client shuts down gets
//!   [`Error::Shutdown`](ezmq_core::Error::Shutdown) at once, and so do new
//!   requests.
//! - Deadlines compare clocks of different machines: keep them in sync
//!   (NTP); skew shortens or lengthens the time a worker grants a request.

mod envelope;
mod ext;
mod message;
mod options;
mod router;
mod worker;

pub use envelope::EnvelopeError;
pub use ext::RequestReplyExt;
pub use message::{Reply, Request};
pub use options::RequestOptions;
pub use uuid::Uuid;
