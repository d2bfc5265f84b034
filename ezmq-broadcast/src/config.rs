//! `BroadcastConfig`: the per-client settings of broadcasting.

use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use ezmq_core::{Error, Result};

/// Longest time between two membership refreshes.
const MAX_REFRESH: Duration = Duration::from_secs(30);

/// Settings of broadcasting for one client (shared by its clones).
///
/// Set them with
/// [`BroadcastExt::set_broadcast_config`](crate::BroadcastExt::set_broadcast_config)
/// before the first broadcast call, or at any time: every later operation
/// uses the new values (running members keep the retention they joined
/// with).
///
/// Producers and consumers of one topic should use the same `retention`.
/// How groups are discovered is the backend's business (see the crate
/// documentation).
///
/// ```
/// use std::time::Duration;
/// use ezmq_broadcast::BroadcastConfig;
///
/// let config = BroadcastConfig::new().with_retention(Duration::from_secs(600));
/// assert!(config.validate().is_ok());
/// assert_eq!(config.refresh_interval(), Duration::from_secs(30));
/// assert!(BroadcastConfig::new()
///     .with_retention(Duration::from_millis(10))
///     .validate()
///     .is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BroadcastConfig {
    /// How long a broadcast waits in a group for a consumer (the TTL of
    /// each copy, counted from the moment it becomes deliverable), and how
    /// long a group whose members all stopped stays in fan-out. At least
    /// 1 s (brokers count whole seconds, rounding up). Default 1 h.
    pub retention: Duration,
}

impl Default for BroadcastConfig {
    fn default() -> Self {
        BroadcastConfig {
            retention: Duration::from_secs(3600),
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

    /// How often a live member refreshes its membership: a third of the
    /// retention, at most 30 s.
    pub fn refresh_interval(&self) -> Duration {
        (self.retention / 3).min(MAX_REFRESH)
    }

    /// Checks the values.
    pub fn validate(&self) -> Result<()> {
        if self.retention < Duration::from_secs(1) {
            return Err(Error::invalid_option("retention", "must be at least 1s"));
        }
        if self.retention > Duration::from_secs(10 * 365 * 24 * 3600) {
            return Err(Error::invalid_option(
                "retention",
                "must be at most ten years",
            ));
        }
        Ok(())
    }
}

/// Per-client broadcasting state, kept in the client's runtime extensions.
#[derive(Debug, Default)]
pub(crate) struct BroadcastState {
    config: RwLock<BroadcastConfig>,
}

impl BroadcastState {
    pub(crate) fn config(&self) -> BroadcastConfig {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_config(&self, config: BroadcastConfig) {
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = config;
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
        assert_eq!(c.refresh_interval(), MAX_REFRESH);
    }

    #[test]
    fn refresh_follows_retention() {
        let c = BroadcastConfig::new().with_retention(Duration::from_secs(3));
        assert_eq!(c.refresh_interval(), Duration::from_secs(1));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn rejects_bad_values() {
        assert!(BroadcastConfig::new()
            .with_retention(Duration::from_millis(500))
            .validate()
            .is_err());
        assert!(BroadcastConfig::new()
            .with_retention(Duration::MAX)
            .validate()
            .is_err());
    }
}
