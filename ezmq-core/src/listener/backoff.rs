//! Waits: retry backoff jitter and the fetch-error backoff.

use std::time::Duration;

use rand::Rng;

use crate::consume_options::Backoff;

/// Largest share of a retry delay added as random jitter.
const MAX_JITTER: f64 = 0.2;

/// `delay` lengthened by a random 0 to 20 %, so jobs that failed together do
/// not come back together. Never shorter than `delay`.
pub(crate) fn with_jitter(delay: Duration) -> Duration {
    let factor: f64 = rand::rng().random_range(0.0..=MAX_JITTER);
    delay.saturating_add(delay.mul_f64(factor))
}

/// Backoff between failed fetches
/// ([`ConsumeOptions::fetch_error_backoff`](crate::ConsumeOptions::fetch_error_backoff)):
/// doubling from its initial wait to its maximum, reset on success.
#[derive(Debug)]
pub(crate) struct FetchBackoff {
    policy: Backoff,
    next: Duration,
}

impl FetchBackoff {
    pub(crate) fn new(policy: &Backoff) -> Self {
        FetchBackoff {
            policy: policy.clone(),
            next: policy.initial,
        }
    }

    /// The wait after one more failure.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(self.policy.max);
        delay
    }

    /// Called after a successful fetch.
    pub(crate) fn reset(&mut self) {
        self.next = self.policy.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let base = Duration::from_millis(1000);
        for _ in 0..200 {
            let d = with_jitter(base);
            assert!(d >= base && d <= Duration::from_millis(1200), "{d:?}");
        }
        assert_eq!(with_jitter(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn fetch_backoff_doubles_caps_and_resets() {
        let mut b = FetchBackoff::new(&crate::ConsumeOptions::default().fetch_error_backoff);
        let waits: Vec<_> = (0..6).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(100));
    }
}
