//! A cluster-wide rate limit on a listener's topic
//! ([`ConsumeOptions::with_rate_limit`](crate::ConsumeOptions::with_rate_limit)).

use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};

/// At most `n` handler starts per `per` for a topic, summed over every
/// listener of the topic in every process: a token bucket that refills
/// continuously at `n / per` and holds at most [`RateLimit::burst`] tokens.
///
/// In any window of length `T` at most `n·T/per + 2·burst` handlers start
/// (see the flow-control guide in `docs/flow-control.md` for where the
/// second burst comes from); over a long run the rate is `n / per` or
/// lower. The default burst is 100 ms worth of the rate (at least 1, at
/// most `n`): 5 for 50 per second, 1 for 10 per second.
///
/// ```
/// use std::time::Duration;
/// use ezmq_core::RateLimit;
///
/// let limit = RateLimit::new(50, Duration::from_secs(1));
/// assert_eq!(limit.burst(), 5);
/// assert_eq!(limit.with_burst(20).burst(), 20);
/// assert!(RateLimit::new(0, Duration::from_secs(1)).validate().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateLimit {
    n: u32,
    per: Duration,
    burst: Option<u32>,
}

/// The longest period a rate limit may have.
const MAX_PERIOD: Duration = Duration::from_secs(24 * 3600);

/// The highest rate a limit may have, per second.
const MAX_PER_SECOND: u128 = 1_000_000;

/// The default burst: this much of the rate.
const DEFAULT_BURST_WINDOW: Duration = Duration::from_millis(100);

impl RateLimit {
    /// At most `n` starts per `per`, with the default burst.
    pub fn new(n: u32, per: Duration) -> Self {
        RateLimit {
            n,
            per,
            burst: None,
        }
    }

    /// The same limit with a burst of `burst` tokens (1 to `n`).
    #[must_use]
    pub fn with_burst(mut self, burst: u32) -> Self {
        self.burst = Some(burst);
        self
    }

    /// Starts per period.
    pub fn n(&self) -> u32 {
        self.n
    }

    /// The period.
    pub fn per(&self) -> Duration {
        self.per
    }

    /// Tokens the bucket holds at most: the starts that may come at once
    /// after a quiet spell.
    pub fn burst(&self) -> u32 {
        self.burst.unwrap_or_else(|| {
            let window = DEFAULT_BURST_WINDOW.as_micros();
            let per = self.per.as_micros().max(1);
            let burst = (u128::from(self.n) * window).div_ceil(per);
            u32::try_from(burst)
                .unwrap_or(u32::MAX)
                .clamp(1, self.n.max(1))
        })
    }

    /// The period in whole milliseconds (at least 1).
    pub(crate) fn per_millis(&self) -> u64 {
        u64::try_from(self.per.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// Checks the values: `n` at least 1, a period from 1 ms to a day, at
    /// most a million starts per second, a burst from 1 to `n`.
    pub fn validate(&self) -> Result<()> {
        let invalid = |reason: String| Err(Error::invalid_option("rate_limit", reason));
        if self.n == 0 {
            return invalid("n must be at least 1 (use a pause to stop a topic)".into());
        }
        if self.per < Duration::from_millis(1) || self.per > MAX_PERIOD {
            return invalid(format!(
                "the period {:?} is outside 1ms..={MAX_PERIOD:?}",
                self.per
            ));
        }
        if u128::from(self.n) * 1000 > MAX_PER_SECOND * self.per.as_millis() {
            return invalid(format!(
                "{self} is above the limit of {MAX_PER_SECOND} per second"
            ));
        }
        if let Some(burst) = self.burst {
            if burst == 0 || burst > self.n {
                return invalid(format!("burst {burst} is outside 1..={}", self.n));
            }
        }
        Ok(())
    }
}

impl fmt::Display for RateLimit {
    /// `50/1s`, with ` burst 20` when the burst was set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{:?}", self.n, self.per)?;
        if let Some(burst) = self.burst {
            write!(f, " burst {burst}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn default_burst_is_a_tenth_of_a_second_of_the_rate() {
        assert_eq!(RateLimit::new(50, SECOND).burst(), 5);
        assert_eq!(RateLimit::new(10, SECOND).burst(), 1);
        assert_eq!(RateLimit::new(1, Duration::from_secs(60)).burst(), 1);
        assert_eq!(RateLimit::new(3, Duration::from_millis(10)).burst(), 3);
        assert_eq!(RateLimit::new(1_000_000, SECOND).burst(), 100_000);
    }

    #[test]
    fn validation_names_the_bad_value() {
        assert!(RateLimit::new(50, SECOND).validate().is_ok());
        for bad in [
            RateLimit::new(0, SECOND),
            RateLimit::new(5, Duration::ZERO),
            RateLimit::new(5, Duration::from_secs(2 * 24 * 3600)),
            RateLimit::new(2_000_000, SECOND),
            RateLimit::new(5, SECOND).with_burst(0),
            RateLimit::new(5, SECOND).with_burst(6),
        ] {
            match bad.validate() {
                Err(Error::InvalidOption { option, reason }) => {
                    assert_eq!(option, "rate_limit");
                    assert!(!reason.is_empty());
                }
                other => panic!("{bad} validated as {other:?}"),
            }
        }
    }

    #[test]
    fn display_shows_rate_and_a_set_burst() {
        assert_eq!(RateLimit::new(50, SECOND).to_string(), "50/1s");
        assert_eq!(
            RateLimit::new(50, SECOND).with_burst(9).to_string(),
            "50/1s burst 9"
        );
    }
}
