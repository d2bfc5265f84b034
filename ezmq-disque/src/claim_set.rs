//! The claim set: the Disque nodes an [exclusive claim](crate::claim) is
//! counted over.
//!
//! The set is the node ids of the cluster's `HELLO` list, sorted. `HELLO`
//! lists every member, also failing ones (a killed or cut-off node stays
//! listed with a worse priority until an operator runs `CLUSTER FORGET`),
//! so the set only changes when the membership does, not when a node
//! fails — and it is the same in every process that asked any node.
//!
//! Two processes may still disagree for a moment after a node joins or is
//! forgotten: each learns it at its next refresh. Sets that differ by **one
//! node** are safe: with sets of `n` and `n+1` nodes, majorities
//! ⌊n/2⌋+1 and ⌊(n+1)/2⌋+1 add up to `n+2`, more than the `n+1` nodes there
//! are. Sets that differ by two (a node replaced: one forgotten and one
//! added at once; two nodes added at once) are not. So a process changes
//! its claim set **one node at a time**: a difference between the set and
//! the `HELLO` list is applied only after it has been seen for the
//! [`membership window`](membership_window) (2 × the refresh interval +
//! 2 s: longer than any two processes take to learn the change), and at
//! most one change per window, lowest id first. Every process then walks
//! through the same sequence of sets, at most one step apart. A process
//! adopts the `HELLO` list as it is at its first claim; one started while
//! the cluster changes by more than one node at once may be more than one
//! step apart from the others until the window has passed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex as StdMutex;
use std::time::{Duration, Instant};

/// How long a membership change must have been seen before the claim set
/// takes it, and how far apart two changes are taken.
pub(crate) fn membership_window(refresh_interval: Duration) -> Duration {
    refresh_interval
        .saturating_mul(2)
        .saturating_add(Duration::from_secs(2))
}

/// The node set claims are counted over, changed one node at a time (see
/// the module documentation).
#[derive(Debug, Default)]
pub(crate) struct ClaimMembers {
    state: StdMutex<Members>,
}

#[derive(Debug, Default)]
struct Members {
    /// The claim set; `None` before the first claim.
    set: Option<BTreeSet<String>>,
    /// Ids in the set but not in `HELLO`, or the other way round, with
    /// when this process first saw the difference.
    pending: BTreeMap<String, Instant>,
    /// When the set last changed.
    last_change: Option<Instant>,
}

impl ClaimMembers {
    /// The claim set for a claim made `now`, given the ids `HELLO` lists;
    /// applies at most one pending change.
    pub(crate) fn current<'a>(
        &self,
        listed: impl IntoIterator<Item = &'a str>,
        window: Duration,
        now: Instant,
    ) -> Vec<String> {
        let listed: BTreeSet<String> = listed.into_iter().map(str::to_owned).collect();
        let mut guard = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let m = &mut *guard;
        let Some(set) = m.set.as_mut() else {
            m.set = Some(listed.clone());
            return listed.into_iter().collect();
        };
        let differing: BTreeSet<String> = set.symmetric_difference(&listed).cloned().collect();
        m.pending.retain(|id, _| differing.contains(id));
        for id in differing {
            m.pending.entry(id).or_insert(now);
        }
        let may_change = m
            .last_change
            .is_none_or(|at| now.saturating_duration_since(at) >= window);
        let ripe = m
            .pending
            .iter()
            .find(|(_, seen)| now.saturating_duration_since(**seen) >= window)
            .map(|(id, _)| id.clone());
        if let (true, Some(id)) = (may_change, ripe) {
            m.pending.remove(&id);
            if !set.remove(&id) {
                tracing::info!(node = %id, "Disque node joins the claim set");
                set.insert(id);
            } else {
                tracing::info!(node = %id, "Disque node leaves the claim set");
            }
            m.last_change = Some(now);
        }
        set.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_secs(10);

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn first_claim_adopts_the_list_sorted() {
        let m = ClaimMembers::default();
        let t = Instant::now();
        assert_eq!(m.current(["c", "a", "b"], W, t), ids(&["a", "b", "c"]));
    }

    #[test]
    fn a_change_waits_for_the_window() {
        let m = ClaimMembers::default();
        let t = Instant::now();
        m.current(["a", "b", "c"], W, t);
        // "d" joins: not counted until it has been seen for the window.
        assert_eq!(m.current(["a", "b", "c", "d"], W, t), ids(&["a", "b", "c"]));
        let later = t + W - Duration::from_millis(1);
        assert_eq!(
            m.current(["a", "b", "c", "d"], W, later),
            ids(&["a", "b", "c"])
        );
        assert_eq!(
            m.current(["a", "b", "c", "d"], W, t + W),
            ids(&["a", "b", "c", "d"])
        );
    }

    #[test]
    fn a_replacement_is_applied_one_node_at_a_time() {
        let m = ClaimMembers::default();
        let t = Instant::now();
        m.current(["a", "b", "c"], W, t);
        // "c" forgotten and "d" added at once.
        m.current(["a", "b", "d"], W, t);
        assert_eq!(m.current(["a", "b", "d"], W, t + W), ids(&["a", "b"]));
        assert_eq!(
            m.current(["a", "b", "d"], W, t + W + Duration::from_secs(1)),
            ids(&["a", "b"])
        );
        assert_eq!(
            m.current(["a", "b", "d"], W, t + 2 * W),
            ids(&["a", "b", "d"])
        );
    }

    #[test]
    fn a_flapping_difference_starts_over() {
        let m = ClaimMembers::default();
        let t = Instant::now();
        m.current(["a", "b"], W, t);
        m.current(["a", "b", "c"], W, t);
        // Gone again before the window: forgotten.
        m.current(["a", "b"], W, t + W / 2);
        let again = t + W;
        assert_eq!(m.current(["a", "b", "c"], W, again), ids(&["a", "b"]));
        assert_eq!(
            m.current(["a", "b", "c"], W, again + W),
            ids(&["a", "b", "c"])
        );
    }

    #[test]
    fn majorities_of_sets_one_node_apart_overlap() {
        for n in 1..10usize {
            let maj = |k: usize| k / 2 + 1;
            assert!(maj(n) + maj(n + 1) > n + 1, "n = {n}");
        }
    }
}
