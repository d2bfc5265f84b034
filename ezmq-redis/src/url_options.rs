//! [`RedisConfig`]'s settings by name: what a URL's query string
//! (`redis://h:6379/0?prefix=app&lease=30s`) and the `EZMQ_*` environment
//! variables set.

use ezmq_core::spi::option_value as value;
use ezmq_core::Result;

use crate::config::RedisConfig;

impl RedisConfig {
    /// The settings [`RedisConfig::with_option`] takes by name, in a URL's
    /// query string or as `EZMQ_<NAME>` variables (through `ezmq::Config`):
    ///
    /// | name | sets | value |
    /// |---|---|---|
    /// | `prefix` | [`key_prefix`](RedisConfig::key_prefix) | text |
    /// | `timeout` | [`command_timeout`](RedisConfig::command_timeout) | duration |
    /// | `connect_timeout` | [`connect_timeout`](RedisConfig::connect_timeout) | duration |
    /// | `lease` | [`lease`](RedisConfig::lease) | duration |
    /// | `reclaim_interval` | [`reclaim_interval`](RedisConfig::reclaim_interval) | duration |
    /// | `block_wait` | [`block_wait`](RedisConfig::block_wait) | duration |
    /// | `wait_replicas` | [`wait_replicas`](RedisConfig::wait_replicas) | `N,TIMEOUT` (`1,500ms`) or `none` |
    /// | `stream_max_len` | [`stream_max_len`](RedisConfig::stream_max_len) | number or `none` |
    /// | `broadcast_max_len` | [`broadcast_max_len`](RedisConfig::broadcast_max_len) | number |
    /// | `group_retention` | [`default_group_retention`](RedisConfig::default_group_retention) | duration |
    /// | `consumer_name` | [`consumer_name`](RedisConfig::consumer_name) | text |
    /// | `message_id_window` | [`message_id_window`](RedisConfig::message_id_window) | duration |
    ///
    /// Durations are `500ms`, `30s`, `2m`, `1h` or plain seconds.
    pub const OPTIONS: &'static [&'static str] = &[
        "prefix",
        "timeout",
        "connect_timeout",
        "lease",
        "reclaim_interval",
        "block_wait",
        "wait_replicas",
        "stream_max_len",
        "broadcast_max_len",
        "group_retention",
        "consumer_name",
        "message_id_window",
    ];

    /// Sets the setting `name` (one of [`RedisConfig::OPTIONS`]) from its
    /// text form. Fails with [`Error::InvalidOption`](ezmq_core::Error::InvalidOption)
    /// naming the setting for a value that does not parse, and listing the
    /// names for an unknown one.
    ///
    /// ```
    /// use ezmq_redis::RedisConfig;
    ///
    /// let config = RedisConfig::default().with_option("prefix", "app")?.with_option("lease", "10s")?;
    /// assert_eq!(config.key_prefix, "app");
    /// assert!(RedisConfig::default().with_option("leese", "10s").is_err());
    /// # Ok::<(), ezmq_core::Error>(())
    /// ```
    pub fn with_option(self, name: &str, text: &str) -> Result<Self> {
        Ok(match name {
            "prefix" => self.with_key_prefix(text),
            "timeout" => self.with_command_timeout(value::duration("timeout", text)?),
            "connect_timeout" => {
                self.with_connect_timeout(value::duration("connect_timeout", text)?)
            }
            "lease" => self.with_lease(value::duration("lease", text)?),
            "reclaim_interval" => {
                self.with_reclaim_interval(value::duration("reclaim_interval", text)?)
            }
            "block_wait" => self.with_block_wait(value::duration("block_wait", text)?),
            "wait_replicas" => match text.trim() {
                "none" => RedisConfig {
                    wait_replicas: None,
                    ..self
                },
                spec => {
                    let (n, timeout) = spec.split_once(',').ok_or_else(|| {
                        ezmq_core::Error::invalid_option(
                            "wait_replicas",
                            format!("{text:?} is not `N,TIMEOUT` (e.g. `1,500ms`) or `none`"),
                        )
                    })?;
                    self.with_wait_replicas(
                        value::number("wait_replicas", n)?,
                        value::duration("wait_replicas", timeout)?,
                    )
                }
            },
            "stream_max_len" => match text.trim() {
                "none" => self.with_stream_max_len(None),
                n => self.with_stream_max_len(Some(value::number("stream_max_len", n)?)),
            },
            "broadcast_max_len" => {
                self.with_broadcast_max_len(value::number("broadcast_max_len", text)?)
            }
            "group_retention" => {
                self.with_default_group_retention(value::duration("group_retention", text)?)
            }
            "consumer_name" => self.with_consumer_name(text),
            "message_id_window" => {
                self.with_message_id_window(value::duration("message_id_window", text)?)
            }
            other => return Err(value::unknown("redis", other, Self::OPTIONS)),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn every_option_is_taken() {
        let samples = [
            ("prefix", "app"),
            ("timeout", "2s"),
            ("connect_timeout", "1s"),
            ("lease", "10s"),
            ("reclaim_interval", "500ms"),
            ("block_wait", "50ms"),
            ("wait_replicas", "1,500ms"),
            ("stream_max_len", "1000"),
            ("broadcast_max_len", "5000"),
            ("group_retention", "2h"),
            ("consumer_name", "worker-1"),
            ("message_id_window", "1h"),
        ];
        assert_eq!(samples.len(), RedisConfig::OPTIONS.len());
        let mut config = RedisConfig::default();
        for (name, text) in samples {
            config = config.with_option(name, text).unwrap();
        }
        assert_eq!(config.key_prefix, "app");
        assert_eq!(config.command_timeout, Duration::from_secs(2));
        assert_eq!(config.wait_replicas, Some((1, Duration::from_millis(500))));
        assert_eq!(config.stream_max_len, Some(1000));
        assert_eq!(config.default_group_retention, Duration::from_secs(7200));
        let err = RedisConfig::default()
            .with_option("wait_replicas", "2")
            .unwrap_err();
        assert!(err.to_string().contains("N,TIMEOUT"), "{err}");
        let err = RedisConfig::default()
            .with_option("max_len", "1")
            .unwrap_err();
        assert!(err.to_string().contains("stream_max_len"), "{err}");
    }
}
