//! `BroadcastReceipt`: what a broadcast push stored.

/// What one broadcast stored: one copy per consumer group that existed at
/// push time.
///
/// Backends that store the copies themselves (Disque, Redis) report how
/// many groups they reached; a broker that fans out natively (a RabbitMQ
/// fanout exchange) does not say, and the count is `None`.
///
/// ```
/// use ezmq_broadcast::BroadcastReceipt;
///
/// let receipt = BroadcastReceipt::default();
/// assert!(receipt.is_empty());
/// assert_eq!(receipt.group_count(), Some(0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BroadcastReceipt {
    groups: Option<usize>,
}

impl Default for BroadcastReceipt {
    fn default() -> Self {
        BroadcastReceipt { groups: Some(0) }
    }
}

impl BroadcastReceipt {
    pub(crate) fn new(groups: Option<usize>) -> Self {
        BroadcastReceipt { groups }
    }

    /// How many groups the broadcast was stored for, when the backend
    /// knows.
    pub fn group_count(&self) -> Option<usize> {
        self.groups
    }

    /// True when the backend reported that no group existed, so nothing
    /// was stored.
    pub fn is_empty(&self) -> bool {
        self.groups == Some(0)
    }
}
