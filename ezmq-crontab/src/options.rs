//! Per-crontab options.

use std::time::Duration;

use chrono_tz::Tz;

/// The default [`CrontabOptions::max_run`]: one hour.
pub const DEFAULT_MAX_RUN: Duration = Duration::from_secs(3600);

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
    /// The overlap policy: whether a tick may run while the run of an
    /// earlier tick of the same crontab is still going **anywhere** (in
    /// any process). Default `false` (skip): the tick is skipped and
    /// logged. A client whose own run is still going does not even claim
    /// the tick; the participant that wins it checks the crontab's *run
    /// claim* (an exclusive claim held, under the tick and the
    /// participant's `host/pid`, for as long as a run goes, at most
    /// [`CrontabOptions::max_run`]) and skips the tick while another
    /// participant's run holds it. `true` (allow): every tick runs,
    /// whatever is still running.
    pub allow_overlap: bool,
    /// How long a run is taken to be going at most, for the overlap
    /// policy: the run claim is given back when the handler ends (returns,
    /// fails or panics), and ends by itself after this long; a run longer
    /// than this can be overlapped. A participant killed mid-run blocks
    /// the crontab's next ticks until presence says its process is gone
    /// (about 15 s: see `run_claim`'s docs), or at most this long on a
    /// backend without presence.
    /// Default [`DEFAULT_MAX_RUN`] (one hour); 1 s to 30 days.
    pub max_run: Duration,
    /// With [`MissedTicks::RunOnce`]: the oldest a missed tick may be and
    /// still be run at start. `None` (the default): half the tick's claim
    /// hold (a period, at least 30 s, at most 4 days).
    pub catch_up_window: Option<Duration>,
    /// How many of its most recent runs the crontab keeps, readable with
    /// [`cron_history`](crate::cron_history) and `ezmq cron history NAME`
    /// (on backends that can peek). Default [`DEFAULT_HISTORY`] (20); 0
    /// keeps none; at most 1000.
    pub history: usize,
}

/// The default [`CrontabOptions::history`]: 20 runs.
pub const DEFAULT_HISTORY: usize = 20;

impl Default for CrontabOptions {
    fn default() -> Self {
        CrontabOptions {
            timezone: Tz::UTC,
            missed_ticks: MissedTicks::Skip,
            allow_overlap: false,
            max_run: DEFAULT_MAX_RUN,
            catch_up_window: None,
            history: DEFAULT_HISTORY,
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

    /// Sets [`CrontabOptions::max_run`].
    #[must_use]
    pub fn with_max_run(mut self, max_run: Duration) -> Self {
        self.max_run = max_run;
        self
    }

    /// Sets [`CrontabOptions::catch_up_window`] (and
    /// [`MissedTicks::RunOnce`]).
    #[must_use]
    pub fn with_catch_up_window(mut self, window: Duration) -> Self {
        self.missed_ticks = MissedTicks::RunOnce;
        self.catch_up_window = Some(window);
        self
    }

    /// Sets [`CrontabOptions::history`].
    #[must_use]
    pub fn with_history(mut self, runs: usize) -> Self {
        self.history = runs;
        self
    }

    /// Checks the values that cannot work.
    pub(crate) fn validate(&self) -> ezmq_core::Result<()> {
        if self.max_run < Duration::from_secs(1) || self.max_run > ezmq_core::spi::MAX_CLAIM_HOLD {
            return Err(ezmq_core::Error::invalid_option(
                "max_run",
                format!("{:?} must be 1s to 30 days", self.max_run),
            ));
        }
        if self.history > 1000 {
            return Err(ezmq_core::Error::invalid_option(
                "history",
                format!("{} runs: at most 1000 are kept", self.history),
            ));
        }
        Ok(())
    }
}
