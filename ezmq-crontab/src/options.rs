//! Per-crontab options.

use chrono_tz::Tz;

/// What a participant does at start about a tick that fell while no
/// participant was running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MissedTicks {
    /// Ignore missed ticks; the first tick run is the first one after
    /// registration. The default.
    #[default]
    Skip,
    /// At registration, claim the most recent past tick and run it if no
    /// participant ran it. Older missed ticks are not run. This works
    /// because a claim stays held for at least two periods (capped at
    /// [`MAX_HOLD`](crate::MAX_HOLD)): a tick that ran is still claimed when
    /// the next participant starts before the following tick. The catch-up
    /// is only attempted when the missed tick is at most half its hold old
    /// (always true for schedules whose period is at most 4 days); for
    /// longer periods a start more than 4 days after the tick cannot tell
    /// whether it ran, so it is skipped (logged).
    RunOnce,
}

/// Options of one crontab, for
/// [`CrontabExt::add_crontab_with`](crate::CrontabExt::add_crontab_with).
///
/// ```
/// use ezmq_crontab::{CrontabOptions, MissedTicks};
///
/// let options = CrontabOptions::default()
///     .with_timezone(chrono_tz::Europe::Paris)
///     .with_missed_ticks(MissedTicks::RunOnce);
/// assert!(!options.allow_overlap);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CrontabOptions {
    /// The zone the expression's fields are read in. Default UTC.
    ///
    /// Handlers always receive the tick as a `DateTime<Utc>`; convert with
    /// `tick.with_timezone(&tz)`. Around a daylight-saving change the ticks
    /// are those of the `cron` crate: a local time that occurs twice ticks
    /// twice (two distinct instants), a local time that does not exist does
    /// not tick.
    pub timezone: Tz,
    /// Missed-tick policy at registration. Default [`MissedTicks::Skip`].
    pub missed_ticks: MissedTicks,
    /// Whether a tick may start in this client while the handler of an
    /// earlier tick of the same crontab is still running here. Default
    /// `false`: such ticks are skipped by this client (logged) and do not
    /// even take part in the claim, so another participant that is idle
    /// can win them. Across processes runs of different ticks can therefore
    /// overlap when a handler is slower than the period.
    pub allow_overlap: bool,
}

impl Default for CrontabOptions {
    fn default() -> Self {
        CrontabOptions {
            timezone: Tz::UTC,
            missed_ticks: MissedTicks::Skip,
            allow_overlap: false,
        }
    }
}

impl CrontabOptions {
    /// Sets [`CrontabOptions::timezone`].
    #[must_use]
    pub fn with_timezone(mut self, timezone: Tz) -> Self {
        self.timezone = timezone;
        self
    }

    /// Sets [`CrontabOptions::missed_ticks`].
    #[must_use]
    pub fn with_missed_ticks(mut self, missed_ticks: MissedTicks) -> Self {
        self.missed_ticks = missed_ticks;
        self
    }

    /// Sets [`CrontabOptions::allow_overlap`].
    #[must_use]
    pub fn with_allow_overlap(mut self, allow: bool) -> Self {
        self.allow_overlap = allow;
        self
    }
}
