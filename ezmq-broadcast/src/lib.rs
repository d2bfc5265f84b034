//! # ezmq-broadcast
//!
//! Broadcast for ezmq: every message pushed to a broadcast topic reaches
//! **every consumer group** of that topic once, and inside a group exactly
//! one member processes it (competing consumers, with the usual ACK, retry
//! and dead-letter behaviour of ezmq listeners).
//!
//! It works on any [`Backend`](ezmq_core::Backend): it only needs `add`,
//! `peek` and the listener runtime, so Disque (which has no pub/sub and no
//! key-value store) is enough.
//!
//! ```no_run
//! # async fn demo<B: ezmq_core::Backend>(client: ezmq_core::Client<B>) -> ezmq_core::Result<()> {
//! use std::time::Duration;
//! use ezmq_broadcast::{BroadcastConfig, BroadcastExt};
//!
//! client.set_broadcast_config(BroadcastConfig::new().with_retention(Duration::from_secs(600)))?;
//! client.add_broadcast_consume_listener("cache.invalidate", "web", |job| async move {
//!     println!("drop {:?}", job.body());
//!     Ok::<(), std::io::Error>(())
//! }).await?;
//! let receipt = client.push_broadcast("cache.invalidate", "user:42".into()).await?;
//! assert!(receipt.group_count() >= 1);
//! # Ok(()) }
//! ```
//!
//! ## Design
//!
//! - Each group has its own queue `__ezmq|bc|<topic>|<group>`, consumed by
//!   the group's members with an ordinary listener.
//! - Membership lives in the registry queue `__ezmq|bcg|<topic>`, which
//!   nobody consumes. A member stores an announcement (a replicated job whose
//!   body is the group name and whose TTL is the retention) before
//!   [`BroadcastExt::add_broadcast_listener`] returns, then refreshes it
//!   every announce interval, replacing the previous one.
//! - A producer reads the registry with a non-consuming, cluster-wide
//!   `peek`, keeps the distinct group names for the discovery interval and
//!   pushes one copy per group (concurrently), each with TTL = retention.
//!
//! ## Guarantees
//!
//! - **New groups**: a broadcast pushed at least
//!   [`discovery_interval`](BroadcastConfig::discovery_interval) after the
//!   group's first `add_broadcast_listener` returned reaches the group (on
//!   the client that added the member, at once). A broadcast pushed before
//!   the group's first member was added never reaches it. A delayed
//!   broadcast goes to the groups known when it is pushed.
//! - **Members all down**: the group stays in fan-out, and its copies wait
//!   in its queue, for [`retention`](BroadcastConfig::retention) after its
//!   last member's last announcement; copies not consumed within the
//!   retention are dropped, and later broadcasts skip the group.
//! - **Cluster**: announcements are replicated like any job and refreshed
//!   every announce interval, so discovery survives the loss of one node.
//! - **Delivery**: at least once per group. Failure-free, each group gets
//!   each broadcast exactly once; duplicates only come from a failure
//!   (redelivery after a consumer crash or timeout, or a broadcast pushed
//!   again after an error).

mod config;
mod ext;
mod listener;
mod names;
mod receipt;
mod registry;

pub use config::BroadcastConfig;
pub use ext::BroadcastExt;
pub use listener::BroadcastListener;
pub use receipt::BroadcastReceipt;

/// The internal queue that the members of `group` consume broadcasts of
/// `topic` from (`__ezmq|bc|<topic>|<group>`), for monitoring (for example
/// `client.backend().queue_len(..)`).
///
/// ```
/// let queue = ezmq_broadcast::group_queue("prices", "search")?;
/// assert_eq!(queue.as_str(), "__ezmq|bc|prices|search");
/// assert!(ezmq_broadcast::group_queue("prices", "bad group").is_err());
/// # Ok::<(), ezmq_core::Error>(())
/// ```
pub fn group_queue(topic: &str, group: &str) -> ezmq_core::Result<ezmq_core::Topic> {
    names::topic_and_group(topic, group).map(|(_, queue)| queue)
}
