//! `BroadcastReceipt`: what a broadcast push stored.

use ezmq_core::JobId;

/// The copies one broadcast stored: one job per consumer group known at
/// push time, in group-name order.
///
/// An empty receipt means no group was known: nothing was stored.
///
/// ```
/// use ezmq_broadcast::BroadcastReceipt;
///
/// let receipt = BroadcastReceipt::default();
/// assert!(receipt.is_empty());
/// assert_eq!(receipt.group_count(), 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BroadcastReceipt {
    jobs: Vec<(String, JobId)>,
}

impl BroadcastReceipt {
    pub(crate) fn new(jobs: Vec<(String, JobId)>) -> Self {
        BroadcastReceipt { jobs }
    }

    /// How many groups the broadcast was stored for.
    pub fn group_count(&self) -> usize {
        self.jobs.len()
    }

    /// True when no group was known, so nothing was stored.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The groups the broadcast was stored for.
    pub fn groups(&self) -> impl Iterator<Item = &str> + '_ {
        self.jobs.iter().map(|(group, _)| group.as_str())
    }

    /// The id of the copy stored for `group`, if any.
    pub fn job_id(&self, group: &str) -> Option<&JobId> {
        self.jobs.iter().find(|(g, _)| g == group).map(|(_, id)| id)
    }

    /// Every `(group, job id)` pair.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &JobId)> + '_ {
        self.jobs.iter().map(|(group, id)| (group.as_str(), id))
    }
}
