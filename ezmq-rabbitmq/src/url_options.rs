//! [`RabbitConfig`]'s settings by name: what a URL's query string
//! (`amqp://u:p@h:5672/%2f?prefix=app&prefetch=50`) and the `EZMQ_*`
//! environment variables set.

use ezmq_core::spi::option_value as value;
use ezmq_core::{Error, Result};

use crate::config::{QueueType, RabbitConfig};

/// The query parameters of an AMQP URI that lapin reads itself; they stay
/// in [`RabbitConfig::url`].
const AMQP_URI_OPTIONS: &[&str] = &[
    "heartbeat",
    "channel_max",
    "frame_max",
    "connection_timeout",
    "auth_mechanism",
];

impl RabbitConfig {
    /// The settings [`RabbitConfig::with_option`] takes by name, in a URL's
    /// query string or as `EZMQ_<NAME>` variables (through `ezmq::Config`):
    ///
    /// | name | sets | value |
    /// |---|---|---|
    /// | `prefix` | [`queue_prefix`](RabbitConfig::queue_prefix) | text |
    /// | `timeout` | [`operation_timeout`](RabbitConfig::operation_timeout) | duration |
    /// | `connect_timeout` | [`connect_timeout`](RabbitConfig::connect_timeout) | duration |
    /// | `prefetch` | [`prefetch`](RabbitConfig::prefetch) | number or `auto` |
    /// | `queue_type` | [`queue_type`](RabbitConfig::queue_type) | `quorum` or `classic` |
    /// | `durable` | [`durable`](RabbitConfig::durable) | `true`/`false` |
    /// | `persistent` | [`persistent`](RabbitConfig::persistent) | `true`/`false` |
    /// | `consumer_timeout` | [`consumer_timeout`](RabbitConfig::consumer_timeout) | duration |
    /// | `max_reconnect_backoff` | [`max_reconnect_backoff`](RabbitConfig::max_reconnect_backoff) | duration |
    /// | `delay_levels` | [`delay_levels`](RabbitConfig::delay_levels) | number (1–32) |
    ///
    /// A URL's query may also carry the AMQP URI parameters lapin reads
    /// (`heartbeat`, `channel_max`, `frame_max`, `connection_timeout`,
    /// `auth_mechanism`); they stay in the URL.
    pub const OPTIONS: &'static [&'static str] = &[
        "prefix",
        "timeout",
        "connect_timeout",
        "prefetch",
        "queue_type",
        "durable",
        "persistent",
        "consumer_timeout",
        "max_reconnect_backoff",
        "delay_levels",
    ];

    /// Sets the setting `name` (one of [`RabbitConfig::OPTIONS`]) from its
    /// text form. Fails with [`Error::InvalidOption`] naming the setting
    /// for a value that does not parse, and listing the names for an
    /// unknown one.
    ///
    /// ```
    /// use ezmq_rabbitmq::RabbitConfig;
    ///
    /// let config = RabbitConfig::default().with_option("prefetch", "50")?;
    /// assert_eq!(config.prefetch, Some(50));
    /// # Ok::<(), ezmq_core::Error>(())
    /// ```
    pub fn with_option(self, name: &str, text: &str) -> Result<Self> {
        Ok(match name {
            "prefix" => self.with_queue_prefix(text),
            "timeout" => self.with_operation_timeout(value::duration("timeout", text)?),
            "connect_timeout" => {
                self.with_connect_timeout(value::duration("connect_timeout", text)?)
            }
            "prefetch" => match text.trim() {
                "auto" => RabbitConfig {
                    prefetch: None,
                    ..self
                },
                n => self.with_prefetch(value::number("prefetch", n)?),
            },
            "queue_type" => self.with_queue_type(match text.trim() {
                "quorum" => QueueType::Quorum,
                "classic" => QueueType::Classic,
                _ => {
                    return Err(Error::invalid_option(
                        "queue_type",
                        format!("{text:?} is not `quorum` or `classic`"),
                    ))
                }
            }),
            "durable" => self.with_durable(value::boolean("durable", text)?),
            "persistent" => self.with_persistent(value::boolean("persistent", text)?),
            "consumer_timeout" => {
                self.with_consumer_timeout(value::duration("consumer_timeout", text)?)
            }
            "max_reconnect_backoff" => {
                self.with_max_reconnect_backoff(value::duration("max_reconnect_backoff", text)?)
            }
            "delay_levels" => self.with_delay_levels(value::number("delay_levels", text)?),
            other => {
                let mut known = Self::OPTIONS.to_vec();
                known.extend_from_slice(AMQP_URI_OPTIONS);
                return Err(value::unknown("rabbitmq", other, &known));
            }
        })
    }

    /// Parses `url`'s query string: ezmq's settings are applied, lapin's
    /// AMQP URI parameters kept in the URL.
    pub(crate) fn from_url_with_query(url: &str) -> Result<Self> {
        let (base, pairs) = value::split_query(url)?;
        let mut kept = Vec::new();
        let mut config = RabbitConfig::default();
        for (name, text) in pairs {
            if AMQP_URI_OPTIONS.contains(&name.as_str()) {
                kept.push(format!("{name}={text}"));
            } else {
                config = config.with_option(&name, &text)?;
            }
        }
        let url = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        Ok(config.with_url(url))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn every_option_is_taken() {
        let samples = [
            ("prefix", "app."),
            ("timeout", "2s"),
            ("connect_timeout", "1s"),
            ("prefetch", "50"),
            ("queue_type", "classic"),
            ("durable", "false"),
            ("persistent", "false"),
            ("consumer_timeout", "1h"),
            ("max_reconnect_backoff", "2s"),
            ("delay_levels", "20"),
        ];
        assert_eq!(samples.len(), RabbitConfig::OPTIONS.len());
        let mut config = RabbitConfig::default();
        for (name, text) in samples {
            config = config.with_option(name, text).unwrap();
        }
        assert_eq!(config.queue_prefix, "app.");
        assert_eq!(config.operation_timeout, Duration::from_secs(2));
        assert_eq!(config.queue_type, QueueType::Classic);
        assert!(!config.durable);
        assert!(config.validate().is_ok());
    }

    #[test]
    fn lapins_parameters_stay_in_the_url() {
        let c = RabbitConfig::from_url_with_query(
            "amqp://u:p@h:5672/%2f?heartbeat=10&prefix=app.&frame_max=8192",
        )
        .unwrap();
        assert_eq!(c.url, "amqp://u:p@h:5672/%2f?heartbeat=10&frame_max=8192");
        assert_eq!(c.queue_prefix, "app.");
        let err = RabbitConfig::from_url_with_query("amqp://h?heartbeet=1").unwrap_err();
        assert!(err.to_string().contains("heartbeat"), "{err}");
    }
}
