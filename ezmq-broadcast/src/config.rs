//! `BroadcastConfig`: the per-client settings of broadcasting.

use std::time::Duration;

use ezmq_core::{Error, Result};

/// Longest automatic announce interval.
const MAX_AUTO_ANNOUNCE: Duration = Duration::from_secs(30);

/// Settings of broadcasting for one client (shared by its clones).
///
/// Set them with
/// [`BroadcastExt::set_broadcast_config`](crate::BroadcastExt::set_broadcast_config)
/// before the first broadcast call, or at any time: every later operation
/// (and the next tick of running announcers) uses the new values.
///
/// Producers and consumers of one topic should use the same `retention`.
///
/// ```
/// use std::time::Duration;
/// use ezmq_broadcast::BroadcastConfig;
///
/// let config = BroadcastConfig::new()
///     .with_retention(Duration::from_secs(600))
///     .with_discovery_interval(Duration::from_millis(500));
/// assert!(config.validate().is_ok());
/// assert_eq!(config.effective_announce_interval(), Duration::from_secs(30));
/// assert!(BroadcastConfig::new()
///     .with_retention(Duration::from_secs(10))
///     .with_announce_interval(Duration::from_secs(10))
///     .validate()
///     .is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BroadcastConfig {
    /// How long a broadcast waits in a group's queue for a consumer (the
    /// TTL of each copy, counted from the moment it becomes deliverable),
    /// and how long a group stays in fan-out after the last announcement of
    /// its last member. Also the TTL of membership announcements.
    /// At least 1 s (brokers count whole seconds, rounding up). Default 1 h.
    pub retention: Duration,
    /// How often a live member refreshes its membership announcement.
    /// `None` (the default) means `retention / 4`, at most 30 s. Must be
    /// shorter than `retention`.
    pub announce_interval: Option<Duration>,
    /// How long a producer reuses the group list it read from the broker.
    /// A group whose first listener started is included in every broadcast
    /// pushed at least this long afterwards. Zero reads the list for every
    /// broadcast. Default 1 s.
    pub discovery_interval: Duration,
    /// The most announcements a producer reads per discovery. Each live
    /// member keeps about one announcement in the registry (plus one per
    /// member that died within `retention`), so this bounds the members
    /// per topic; a warning is logged when the limit is reached.
    /// Default 10 000.
    pub discovery_limit: usize,
}

impl Default for BroadcastConfig {
    fn default() -> Self {
        BroadcastConfig {
            retention: Duration::from_secs(3600),
            announce_interval: None,
            discovery_interval: Duration::from_secs(1),
            discovery_limit: 10_000,
        }
    }
}

impl BroadcastConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`BroadcastConfig::retention`].
    #[must_use]
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// Sets [`BroadcastConfig::announce_interval`].
    #[must_use]
    pub fn with_announce_interval(mut self, interval: Duration) -> Self {
        self.announce_interval = Some(interval);
        self
    }

    /// Sets [`BroadcastConfig::discovery_interval`].
    #[must_use]
    pub fn with_discovery_interval(mut self, interval: Duration) -> Self {
        self.discovery_interval = interval;
        self
    }

    /// Sets [`BroadcastConfig::discovery_limit`].
    #[must_use]
    pub fn with_discovery_limit(mut self, limit: usize) -> Self {
        self.discovery_limit = limit;
        self
    }

    /// The announce interval in use: the configured one, or
    /// `retention / 4` capped at 30 s.
    pub fn effective_announce_interval(&self) -> Duration {
        self.announce_interval
            .unwrap_or_else(|| (self.retention / 4).min(MAX_AUTO_ANNOUNCE))
    }

    /// Checks the values.
    pub fn validate(&self) -> Result<()> {
        if self.retention < Duration::from_secs(1) {
            return Err(Error::invalid_option("retention", "must be at least 1s"));
        }
        let announce = self.effective_announce_interval();
        if announce < Duration::from_millis(10) {
            return Err(Error::invalid_option(
                "announce_interval",
                "must be at least 10ms",
            ));
        }
        if announce >= self.retention {
            return Err(Error::invalid_option(
                "announce_interval",
                format!(
                    "{announce:?} must be shorter than the retention {:?}",
                    self.retention
                ),
            ));
        }
        if self.discovery_limit == 0 {
            return Err(Error::invalid_option(
                "discovery_limit",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let c = BroadcastConfig::default();
        assert!(c.validate().is_ok());
        assert_eq!(c.retention, Duration::from_secs(3600));
        assert_eq!(c.effective_announce_interval(), Duration::from_secs(30));
        assert_eq!(c.discovery_interval, Duration::from_secs(1));
    }

    #[test]
    fn auto_announce_interval_follows_retention() {
        let c = BroadcastConfig::new().with_retention(Duration::from_secs(2));
        assert_eq!(c.effective_announce_interval(), Duration::from_millis(500));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn rejects_bad_values() {
        let s = Duration::from_secs;
        assert!(BroadcastConfig::new()
            .with_retention(Duration::from_millis(500))
            .validate()
            .is_err());
        assert!(BroadcastConfig::new()
            .with_retention(s(5))
            .with_announce_interval(s(5))
            .validate()
            .is_err());
        assert!(BroadcastConfig::new()
            .with_announce_interval(Duration::ZERO)
            .validate()
            .is_err());
        assert!(BroadcastConfig::new()
            .with_discovery_limit(0)
            .validate()
            .is_err());
        assert!(BroadcastConfig::new()
            .with_discovery_interval(Duration::ZERO)
            .validate()
            .is_ok());
    }
}
