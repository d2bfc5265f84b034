//! [`DisqueConfig`]'s settings by name: what a URL's query string
//! (`disque://h:7711?replicate=2&retry=30s`) and the `EZMQ_*` environment
//! variables set.

use ezmq_core::spi::option_value as value;
use ezmq_core::{Error, Result};

use crate::config::DisqueConfig;
use crate::error::DisqueError;

impl DisqueConfig {
    /// The settings [`DisqueConfig::with_option`] takes by name, in a URL's
    /// query string or as `EZMQ_<NAME>` variables (through `ezmq::Config`):
    ///
    /// | name | sets | value |
    /// |---|---|---|
    /// | `timeout` | [`command_timeout`](DisqueConfig::command_timeout) | duration |
    /// | `connect_timeout` | [`connect_timeout`](DisqueConfig::connect_timeout) | duration |
    /// | `replicate` | [`default_replicate`](DisqueConfig::default_replicate) | number |
    /// | `retry` | [`default_retry`](DisqueConfig::default_retry) | duration |
    /// | `ttl` | [`default_ttl`](DisqueConfig::default_ttl) | duration |
    /// | `add_timeout` | [`default_add_timeout`](DisqueConfig::default_add_timeout) | duration |
    /// | `refresh_interval` | [`refresh_interval`](DisqueConfig::refresh_interval) | duration |
    /// | `max_attempts` | [`max_attempts`](DisqueConfig::max_attempts) | number |
    /// | `retry_backoff` | [`retry_backoff`](DisqueConfig::retry_backoff) | duration |
    /// | `getjob_pool_size` | [`getjob_pool_size`](DisqueConfig::getjob_pool_size) | number |
    /// | `connections_per_node` | [`connections_per_node`](DisqueConfig::connections_per_node) | number |
    /// | `hang_timeout` | [`hang_timeout`](DisqueConfig::hang_timeout) | duration |
    ///
    /// `prefix`, which the other backends take, is refused: Disque queues
    /// are named after their topics, and this backend has no name prefix
    /// (give each service its own topic names, or its own nodes).
    pub const OPTIONS: &'static [&'static str] = &[
        "timeout",
        "connect_timeout",
        "replicate",
        "retry",
        "ttl",
        "add_timeout",
        "refresh_interval",
        "max_attempts",
        "retry_backoff",
        "getjob_pool_size",
        "connections_per_node",
        "hang_timeout",
    ];

    /// Sets the setting `name` (one of [`DisqueConfig::OPTIONS`]) from its
    /// text form. Fails with [`Error::InvalidOption`] naming the setting
    /// for a value that does not parse, and listing the names for an
    /// unknown one.
    ///
    /// ```
    /// use ezmq_disque::DisqueConfig;
    ///
    /// let config = DisqueConfig::default().with_option("replicate", "2")?;
    /// assert_eq!(config.default_replicate, Some(2));
    /// assert!(DisqueConfig::default().with_option("prefix", "app").is_err());
    /// # Ok::<(), ezmq_disque::Error>(())
    /// ```
    pub fn with_option(self, name: &str, text: &str) -> Result<Self> {
        Ok(match name {
            "timeout" => self.with_command_timeout(value::duration("timeout", text)?),
            "connect_timeout" => {
                self.with_connect_timeout(value::duration("connect_timeout", text)?)
            }
            "replicate" => self.with_default_replicate(value::number("replicate", text)?),
            "retry" => self.with_default_retry(value::duration("retry", text)?),
            "ttl" => self.with_default_ttl(value::duration("ttl", text)?),
            "add_timeout" => self.with_default_add_timeout(value::duration("add_timeout", text)?),
            "refresh_interval" => {
                self.with_refresh_interval(value::duration("refresh_interval", text)?)
            }
            "max_attempts" => self.with_max_attempts(value::number("max_attempts", text)?),
            "retry_backoff" => self.with_retry_backoff(value::duration("retry_backoff", text)?),
            "getjob_pool_size" => {
                self.with_getjob_pool_size(value::number("getjob_pool_size", text)?)
            }
            "connections_per_node" => {
                self.with_connections_per_node(value::number("connections_per_node", text)?)
            }
            "hang_timeout" => self.with_hang_timeout(value::duration("hang_timeout", text)?),
            "prefix" => {
                return Err(Error::invalid_option(
                    "prefix",
                    "the Disque backend has no name prefix: its queues are named after their \
                     topics; give each service its own topic names (or its own nodes)",
                ))
            }
            other => return Err(value::unknown("disque", other, Self::OPTIONS)),
        })
    }
}

/// An option error of [`DisqueConfig::with_option`] as the
/// [`DisqueError`] that `FromStr` returns.
pub(crate) fn option_error(err: Error, url: String) -> DisqueError {
    match err {
        Error::InvalidOption { option, reason } => DisqueError::InvalidConfig { option, reason },
        other => DisqueError::InvalidUrl {
            url,
            reason: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn every_option_is_taken() {
        let samples = [
            ("timeout", "2s"),
            ("connect_timeout", "1s"),
            ("replicate", "2"),
            ("retry", "30s"),
            ("ttl", "1h"),
            ("add_timeout", "200ms"),
            ("refresh_interval", "10s"),
            ("max_attempts", "5"),
            ("retry_backoff", "2s"),
            ("getjob_pool_size", "3"),
            ("connections_per_node", "2"),
            ("hang_timeout", "5s"),
        ];
        assert_eq!(samples.len(), DisqueConfig::OPTIONS.len());
        let mut config = DisqueConfig::default();
        for (name, text) in samples {
            config = config.with_option(name, text).unwrap();
        }
        assert_eq!(config.command_timeout, Duration::from_secs(2));
        assert_eq!(config.default_replicate, Some(2));
        assert_eq!(config.max_attempts, 5);
        let err = DisqueConfig::default()
            .with_option("prefix", "a")
            .unwrap_err();
        assert!(err.to_string().contains("no name prefix"), "{err}");
    }
}
