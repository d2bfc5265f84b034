//! Cluster-wide concurrency slots kept in exclusive claims: the rules of
//! [`ConsumeOptions::with_global_concurrency`](crate::ConsumeOptions::with_global_concurrency).
//!
//! A claim cannot be extended (a Disque job's TTL and a RabbitMQ queue's
//! expiry are fixed), so a slot is held in **epochs** of one lease `L` of
//! wall-clock time: slot `i` in epoch `e = ⌊unix_ms / L⌋` is the claim
//! `__ezmq|slot|<topic>|<n>-<L_ms>|<i>|<e>`, held for `2L` from when it is
//! won, so it outlives its epoch.
//!
//! - A holder of `(i, e)` may run a handler on slot `i` until epoch `e`
//!   ends, and **renews** by claiming `(i, e + 1)` from the middle of `e`
//!   on.
//! - A **newcomer** may claim `(i, e)` only in the middle half of `e`
//!   (from a quarter to three quarters of it, by its own clock), so that
//!   it has an eighth of a lease or more to renew before `e` ends.
//!
//! So the live holder always claims the next epoch before any newcomer
//! may, as long as clocks differ by less than `¾·L` (3 s at the default
//! lease of 4 s), and each `(i, e)` has one winner: at most `n` slots are
//! held in any epoch. A holder that dies stops renewing; its slot is free
//! for newcomers at most `2¼·L` after its death (it may have renewed the
//! next epoch just before). A slot that is no longer used is simply not
//! renewed.

use std::time::Duration;

use crate::error::Result;
use crate::topic::Topic;

/// The epochs of one limit: where a moment falls, and what may be
/// claimed then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Epochs {
    lease_ms: u64,
}

impl Epochs {
    /// The epochs of a slot lease.
    pub(crate) fn of(lease: Duration) -> Self {
        Epochs {
            lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1),
        }
    }

    /// The epoch `now_ms` falls in.
    pub(crate) fn epoch(&self, now_ms: u64) -> u64 {
        now_ms / self.lease_ms
    }

    /// How far into its epoch `now_ms` is.
    fn offset(&self, now_ms: u64) -> u64 {
        now_ms % self.lease_ms
    }

    /// True when a newcomer may claim a slot of the current epoch.
    pub(crate) fn may_join(&self, now_ms: u64) -> bool {
        let offset = self.offset(now_ms);
        offset >= self.lease_ms / 4 && offset < self.lease_ms * 3 / 4
    }

    /// Time until a newcomer may claim (zero when it may now).
    pub(crate) fn until_join(&self, now_ms: u64) -> Duration {
        let offset = self.offset(now_ms);
        let quarter = self.lease_ms / 4;
        if offset < quarter {
            Duration::from_millis(quarter - offset)
        } else if offset >= self.lease_ms * 3 / 4 {
            Duration::from_millis(self.lease_ms - offset + quarter)
        } else {
            Duration::ZERO
        }
    }

    /// True in the last quarter of an epoch: a slot not renewed by then is
    /// not handed to a new job (the renewal ticker might not get to it
    /// before the epoch ends, and the job would outlive its claim).
    pub(crate) fn is_late(&self, now_ms: u64) -> bool {
        self.offset(now_ms) >= self.lease_ms * 3 / 4
    }

    /// True when a holder of the current epoch should claim the next one.
    pub(crate) fn renewal_due(&self, now_ms: u64) -> bool {
        self.offset(now_ms) >= self.lease_ms / 2
    }

    /// How long every slot claim is held.
    pub(crate) fn hold(&self) -> Duration {
        Duration::from_millis(self.lease_ms.saturating_mul(2))
    }

    /// How often the renewal ticker looks.
    pub(crate) fn tick(&self) -> Duration {
        Duration::from_millis((self.lease_ms / 8).max(10))
    }

    /// The claim of slot `index` of `bucket` in `epoch`, for a limit of `n`.
    pub(crate) fn key(&self, bucket: &Topic, n: u32, index: u32, epoch: u64) -> Result<Topic> {
        let limit = format!("{n}-{}", self.lease_ms);
        Topic::internal(
            "slot",
            &[
                bucket.as_str(),
                &limit,
                &index.to_string(),
                &epoch.to_string(),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_renews_before_any_newcomer_may_join() {
        let epochs = Epochs::of(Duration::from_secs(4));
        let start = 4_000 * 1_000;
        assert_eq!(epochs.epoch(start + 3_999), 1_000);
        assert!(!epochs.may_join(start + 999));
        assert!(epochs.may_join(start + 1_000));
        assert_eq!(epochs.until_join(start + 400), Duration::from_millis(600));
        assert_eq!(epochs.until_join(start + 1_500), Duration::ZERO);
        // Not in the last quarter: a newcomer must have time to renew.
        assert!(!epochs.may_join(start + 3_000));
        assert!(epochs.is_late(start + 3_000) && !epochs.is_late(start + 2_999));
        assert_eq!(
            epochs.until_join(start + 3_500),
            Duration::from_millis(1_500)
        );
        assert!(!epochs.renewal_due(start + 1_999));
        assert!(epochs.renewal_due(start + 2_000));
        // Renewing at the middle of e comes ¾ L before a newcomer may join e + 1.
        let renew = start + 2_000;
        let join_next = start + 4_000 + 1_000;
        assert_eq!(join_next - renew, 3_000);
        assert!(epochs.hold() >= Duration::from_millis(4_000 + 2_000));
    }

    #[test]
    fn keys_name_the_limit_the_slot_and_the_epoch() {
        let epochs = Epochs::of(Duration::from_secs(4));
        let topic = Topic::new("orders").expect("topic");
        let key = epochs.key(&topic, 5, 3, 77).expect("key");
        assert_eq!(key.as_str(), "__ezmq|slot|orders|5-4000|3|77");
    }
}
