//! `BroadcastListener`: the handle of one group member.

use std::time::Duration;

use ezmq_core::{ListenerHandle, Topic};
use tokio_util::sync::CancellationToken;

/// A running member of a broadcast consumer group: a listener on the group
/// plus the task that keeps the membership alive (refreshed about every
/// third of the retention, left when the member stops).
///
/// Like [`ListenerHandle`], the member belongs to the client, not to the
/// handle: dropping the handle does **not** stop it; it runs until
/// [`BroadcastListener::stop`] or the client's shutdown. Clones control the
/// same member.
///
/// Stopping a member does not remove its group at once: the group stays in
/// fan-out, and its messages are kept, for up to the retention after the
/// member's last refresh (see the crate documentation).
#[derive(Clone, Debug)]
pub struct BroadcastListener {
    topic: Topic,
    group: String,
    listener: ListenerHandle,
    membership: CancellationToken,
    membership_done: CancellationToken,
}

impl BroadcastListener {
    pub(crate) fn new(
        topic: Topic,
        group: String,
        listener: ListenerHandle,
        membership: CancellationToken,
        membership_done: CancellationToken,
    ) -> Self {
        BroadcastListener {
            topic,
            group,
            listener,
            membership,
            membership_done,
        }
    }

    /// The broadcast topic.
    pub fn topic(&self) -> &Topic {
        &self.topic
    }

    /// The consumer group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The underlying listener on the group (a
    /// [`Source::Group`](ezmq_core::spi::Source::Group)).
    pub fn listener(&self) -> &ListenerHandle {
        &self.listener
    }

    /// Handlers running right now.
    pub fn in_flight(&self) -> usize {
        self.listener.in_flight()
    }

    /// True until a stop is requested (by [`BroadcastListener::stop`] or the
    /// client's shutdown).
    pub fn is_running(&self) -> bool {
        self.listener.is_running() && !self.membership.is_cancelled()
    }

    /// True once the member has left its group and its listener has
    /// drained.
    pub fn is_finished(&self) -> bool {
        self.listener.is_finished() && self.membership_done.is_cancelled()
    }

    /// Stops refreshing the membership and leaves the group, then stops
    /// the listener as [`ListenerHandle::stop`] does (running handlers get
    /// `grace`), and waits for both. Once it returns, the membership is no
    /// longer refreshed.
    pub async fn stop(&self, grace: Duration) {
        self.membership.cancel();
        self.membership_done.cancelled().await;
        self.listener.stop(grace).await;
    }
}
