//! # ezmq-broadcast
//!
//! Broadcast for ezmq: every message pushed to a broadcast topic reaches
//! **every consumer group** of that topic once, and inside a group exactly
//! one member processes it (competing consumers, with the usual ACK, retry
//! and dead-letter behaviour of ezmq listeners).
//!
//! [`BroadcastExt`] works on every [`MqClient`](ezmq_core::MqClient) (the
//! `Client` of any backend crate, an `Arc<dyn MqClient>`) whose backend
//! reports [`Capability::FanOut`](ezmq_core::spi::Capability::FanOut); on
//! any other backend its methods fail at once with
//! [`Error::Unsupported`](ezmq_core::Error::Unsupported).
//!
//! ```no_run
//! # async fn demo(client: ezmq_core::Client) -> ezmq_core::Result<()> {
//! use std::time::Duration;
//! use ezmq_broadcast::{BroadcastConfig, BroadcastExt};
//!
//! client.set_broadcast_config(BroadcastConfig::new().with_retention(Duration::from_secs(600)))?;
//! client.add_broadcast_consume_listener("cache.invalidate", "web", |job| async move {
//!     println!("drop {:?}", job.body());
//!     Ok::<(), std::io::Error>(())
//! }).await?;
//! let receipt = client.push_broadcast("cache.invalidate", "user:42".into()).await?;
//! assert_ne!(receipt.group_count(), Some(0));
//! # Ok(()) }
//! ```
//!
//! ## Design
//!
//! This crate only speaks the [`FanOut`](ezmq_core::spi::FanOut) capability:
//! a member joins its group with `join_group(topic, group, retention)`,
//! refreshes the returned membership about every third of the retention
//! (at most every 30 s) from a task owned by the client, leaves it when it
//! stops, and consumes with an ordinary listener on
//! `Source::Group { topic, group }`. A producer calls `publish_to_groups`.
//! What the backends do behind it:
//!
//! | Backend | Groups | Membership | Publish |
//! |---|---|---|---|
//! | Disque | a queue per group, `__ezmq\|bc\|<topic>\|<group>` | a TTL'd announcement job per member in the registry queue `__ezmq\|bcg\|<topic>`, replaced at every refresh | reads the registry with a cluster-wide `QPEEK` (cached 1 s), one `ADDJOB` per group |
//! | Redis | a stream consumer group per ezmq group | the consumer group itself (`XGROUP CREATE`) | one `XADD` to the topic's stream |
//! | RabbitMQ | a queue per group bound to the topic's fanout exchange | the queue (with an expiry of the retention) | one publish to the exchange (the receipt's count is `None`) |
//!
//! ## Guarantees
//!
//! - **New groups**: a broadcast pushed after the group's first
//!   `add_broadcast_listener` returned reaches the group (on Disque, from
//!   another client, up to its 1 s discovery cache later). A broadcast
//!   pushed before the group's first member joined never reaches it. A
//!   delayed broadcast goes to the groups that exist when it is pushed.
//! - **Members all down**: the group stays in fan-out, and its copies wait,
//!   for [`retention`](BroadcastConfig::retention) after its last member's
//!   last refresh; copies not consumed within the retention are dropped.
//! - **Unknown groups are an error**: when the backend cannot tell which
//!   groups exist (Disque: the registry cannot be read and no group is
//!   known), the broadcast fails instead of silently storing nothing.
//! - **Delivery**: at least once per group. Failure-free, each group gets
//!   each broadcast exactly once; duplicates only come from a failure
//!   (redelivery after a consumer crash or timeout, or a broadcast pushed
//!   again after an error).
//! - **Dead letters**: copies that failed for good go to
//!   `<topic>.<group>.dead-letter` (the core's default for a group), a
//!   topic a normal consume listener can read.

mod config;
mod ext;
mod listener;
mod names;
mod receipt;

pub use config::BroadcastConfig;
pub use ext::BroadcastExt;
pub use listener::BroadcastListener;
pub use receipt::BroadcastReceipt;
