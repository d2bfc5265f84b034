//! How long a tick's claim is held and how late it may still be claimed.

use std::time::Duration;

/// The shortest time a tick's claim is held: claims of fast schedules are
/// held at least this long, so clock skew up to
/// `MIN_HOLD - MAX_CLAIM_WINDOW` (30 s) cannot produce a duplicate.
pub const MIN_HOLD: Duration = Duration::from_secs(60);

/// The longest time a tick's claim is held (8 days). Schedules with a
/// period above 4 days get less than two periods; see
/// [`MissedTicks::RunOnce`](crate::MissedTicks::RunOnce).
pub const MAX_HOLD: Duration = Duration::from_secs(8 * 24 * 3600);

/// The latest a participant still tries to claim a tick, after the tick's
/// time: half the period, at least 1 s, at most this (30 s).
pub const MAX_CLAIM_WINDOW: Duration = Duration::from_secs(30);

const MIN_CLAIM_WINDOW: Duration = Duration::from_secs(1);

/// Hold of a tick's claim: two periods, within [`MIN_HOLD`]..=[`MAX_HOLD`].
pub(crate) fn claim_hold(period: Duration) -> Duration {
    period.saturating_mul(2).clamp(MIN_HOLD, MAX_HOLD)
}

/// How long after a tick's time it may still be claimed: half a period,
/// within 1 s..=[`MAX_CLAIM_WINDOW`].
pub(crate) fn claim_window(period: Duration) -> Duration {
    (period / 2).clamp(MIN_CLAIM_WINDOW, MAX_CLAIM_WINDOW)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_and_window() {
        let s = Duration::from_secs;
        assert_eq!(claim_hold(s(1)), MIN_HOLD);
        assert_eq!(claim_hold(s(60)), s(120));
        assert_eq!(claim_hold(s(24 * 3600)), s(48 * 3600));
        assert_eq!(claim_hold(s(365 * 24 * 3600)), MAX_HOLD);
        assert_eq!(claim_window(s(1)), s(1));
        assert_eq!(claim_window(s(10)), s(5));
        assert_eq!(claim_window(s(3600)), MAX_CLAIM_WINDOW);
        // A late claim is always still covered by the hold, with room for
        // clock skew.
        for p in [1, 2, 10, 59, 60, 3600, 86_400, 10_000_000] {
            assert!(claim_hold(s(p)) >= claim_window(s(p)) + s(30), "{p}");
        }
    }
}
