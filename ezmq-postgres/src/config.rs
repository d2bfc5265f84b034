//! `PostgresConfig`: where PostgreSQL is and how the backend uses it.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ezmq_core::spi::option_value as value;
use ezmq_core::spi::url_redaction::redact_password as redact;
use ezmq_core::{Error, Result};

/// The URL used when none is given.
pub const DEFAULT_URL: &str = "postgres://127.0.0.1:5432/postgres";

/// Settings of a [`PostgresBackend`](crate::PostgresBackend). Every field
/// has a documented default; set them with the `with_*` methods.
///
/// ```
/// use std::time::Duration;
/// use ezmq_postgres::PostgresConfig;
///
/// let config: PostgresConfig = "postgres://app:secret@10.0.0.5/orders?lease=60s".parse()?;
/// assert_eq!(config.lease, Duration::from_secs(60));
/// assert_eq!(config.schema, "ezmq");
/// assert!(!format!("{config:?}").contains("secret"));
/// let config = config.with_schema("jobs").with_max_connections(20);
/// assert_eq!(config.schema, "jobs");
/// # Ok::<(), ezmq_core::Error>(())
/// ```
///
/// Its `Debug` output redacts the password in the URL, as do every error
/// and log line of this backend.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PostgresConfig {
    /// `postgres://[user[:password]@]host[:port]/database` (or
    /// `postgresql://`). Default `postgres://127.0.0.1:5432/postgres`.
    pub url: String,
    /// The schema ezmq's tables live in, created (and migrated) on
    /// connect: lower-case letters, digits and `_`, at most 48. Default
    /// `ezmq`. Name `prefix` in a URL's query string.
    pub schema: String,
    /// How long a fetched job stays with its consumer without a lease
    /// extension before another consumer may take it. Default 30 s.
    pub lease: Duration,
    /// The longest a waiting listener goes without looking at its queue
    /// when no notification came (a notification lost while the
    /// `LISTEN` connection was down, say). Default 1 s.
    pub poll_interval: Duration,
    /// Connections in the pool (one more is held for `LISTEN`).
    /// Default 10.
    pub max_connections: u32,
    /// Timeout of one statement, including the wait for a pooled
    /// connection. Default 5 s.
    pub command_timeout: Duration,
    /// Timeout of one connection attempt. Default 5 s.
    pub connect_timeout: Duration,
    /// How long a push's message id
    /// ([`PushOptions::with_message_id`](ezmq_core::PushOptions::with_message_id))
    /// is remembered: another push to the same topic with that id within
    /// the window stores nothing and returns the first push's job id.
    /// Default 24 h.
    pub message_id_window: Duration,
    /// How often the backend deletes what has expired (jobs past their
    /// ttl, message ids past their window, claims, groups without
    /// members, unread replies). Default 10 s.
    pub sweep_interval: Duration,
}

impl fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("url", &self.redacted_url())
            .field("schema", &self.schema)
            .field("lease", &self.lease)
            .field("poll_interval", &self.poll_interval)
            .field("max_connections", &self.max_connections)
            .field("command_timeout", &self.command_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("message_id_window", &self.message_id_window)
            .field("sweep_interval", &self.sweep_interval)
            .finish()
    }
}

impl Default for PostgresConfig {
    fn default() -> Self {
        PostgresConfig {
            url: DEFAULT_URL.to_owned(),
            schema: "ezmq".to_owned(),
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            max_connections: 10,
            command_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            message_id_window: Duration::from_secs(24 * 3600),
            sweep_interval: Duration::from_secs(10),
        }
    }
}

impl PostgresConfig {
    /// A configuration for `url` with every other setting at its default.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresConfig {
            url: url.into(),
            ..Self::default()
        }
    }

    /// Sets [`PostgresConfig::schema`].
    #[must_use]
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Sets [`PostgresConfig::lease`].
    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets [`PostgresConfig::poll_interval`].
    #[must_use]
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Sets [`PostgresConfig::max_connections`].
    #[must_use]
    pub fn with_max_connections(mut self, max: u32) -> Self {
        self.max_connections = max;
        self
    }

    /// Sets [`PostgresConfig::command_timeout`].
    #[must_use]
    pub fn with_command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Sets [`PostgresConfig::connect_timeout`].
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`PostgresConfig::message_id_window`].
    #[must_use]
    pub fn with_message_id_window(mut self, window: Duration) -> Self {
        self.message_id_window = window;
        self
    }

    /// Sets [`PostgresConfig::sweep_interval`].
    #[must_use]
    pub fn with_sweep_interval(mut self, interval: Duration) -> Self {
        self.sweep_interval = interval;
        self
    }

    /// The settings [`PostgresConfig::with_option`] takes by name, in a
    /// URL's query string or as `EZMQ_<NAME>` variables (through
    /// `ezmq::Config`):
    ///
    /// | name | sets | value |
    /// |---|---|---|
    /// | `prefix` | [`schema`](PostgresConfig::schema) | text |
    /// | `timeout` | [`command_timeout`](PostgresConfig::command_timeout) | duration |
    /// | `connect_timeout` | [`connect_timeout`](PostgresConfig::connect_timeout) | duration |
    /// | `lease` | [`lease`](PostgresConfig::lease) | duration |
    /// | `poll_interval` | [`poll_interval`](PostgresConfig::poll_interval) | duration |
    /// | `max_connections` | [`max_connections`](PostgresConfig::max_connections) | number |
    /// | `message_id_window` | [`message_id_window`](PostgresConfig::message_id_window) | duration |
    /// | `sweep_interval` | [`sweep_interval`](PostgresConfig::sweep_interval) | duration |
    ///
    /// Durations are `500ms`, `30s`, `2m`, `1h` or plain seconds.
    pub const OPTIONS: &'static [&'static str] = &[
        "prefix",
        "timeout",
        "connect_timeout",
        "lease",
        "poll_interval",
        "max_connections",
        "message_id_window",
        "sweep_interval",
    ];

    /// Sets the setting `name` (one of [`PostgresConfig::OPTIONS`]) from
    /// its text form. Fails with [`Error::InvalidOption`] naming the
    /// setting for a value that does not parse, and listing the names for
    /// an unknown one.
    ///
    /// ```
    /// use ezmq_postgres::PostgresConfig;
    ///
    /// let config = PostgresConfig::default().with_option("prefix", "app")?.with_option("lease", "10s")?;
    /// assert_eq!(config.schema, "app");
    /// assert!(PostgresConfig::default().with_option("leese", "10s").is_err());
    /// # Ok::<(), ezmq_core::Error>(())
    /// ```
    pub fn with_option(self, name: &str, text: &str) -> Result<Self> {
        Ok(match name {
            "prefix" => self.with_schema(text.trim()),
            "timeout" => self.with_command_timeout(value::duration("timeout", text)?),
            "connect_timeout" => {
                self.with_connect_timeout(value::duration("connect_timeout", text)?)
            }
            "lease" => self.with_lease(value::duration("lease", text)?),
            "poll_interval" => self.with_poll_interval(value::duration("poll_interval", text)?),
            "max_connections" => self.with_max_connections(value::number("max_connections", text)?),
            "message_id_window" => {
                self.with_message_id_window(value::duration("message_id_window", text)?)
            }
            "sweep_interval" => self.with_sweep_interval(value::duration("sweep_interval", text)?),
            other => return Err(value::unknown("postgres", other, Self::OPTIONS)),
        })
    }

    /// The URL with its password redacted: what errors and logs show.
    pub(crate) fn redacted_url(&self) -> String {
        redact(&self.url)
    }

    /// Checks the values that cannot work.
    pub fn validate(&self) -> Result<()> {
        if !(self.url.starts_with("postgres://") || self.url.starts_with("postgresql://")) {
            return Err(Error::invalid_option(
                "url",
                format!(
                    "{:?} is not a postgres:// or postgresql:// URL",
                    self.redacted_url()
                ),
            ));
        }
        let schema_ok = !self.schema.is_empty()
            && self.schema.len() <= 48
            && self
                .schema
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !self.schema.as_bytes()[0].is_ascii_digit();
        if !schema_ok {
            return Err(Error::invalid_option(
                "prefix",
                format!(
                    "schema {:?} must be 1 to 48 lower-case letters, digits or `_`, \
                     not starting with a digit",
                    self.schema
                ),
            ));
        }
        if self.lease < Duration::from_millis(100) {
            return Err(Error::invalid_option("lease", "must be at least 100 ms"));
        }
        if self.max_connections < 2 {
            return Err(Error::invalid_option(
                "max_connections",
                "must be at least 2 (a waiting listener holds one only while it fetches)",
            ));
        }
        value::at_least_a_millisecond(&[
            ("poll_interval", self.poll_interval),
            ("timeout", self.command_timeout),
            ("connect_timeout", self.connect_timeout),
            ("message_id_window", self.message_id_window),
            ("sweep_interval", self.sweep_interval),
        ])
    }
}

impl FromStr for PostgresConfig {
    type Err = Error;

    /// Parses `postgres://[user[:password]@]host[:port]/database` (or
    /// `postgresql://`) with settings in the query string
    /// (`?prefix=app&lease=30s`, the names of [`PostgresConfig::OPTIONS`]).
    fn from_str(url: &str) -> Result<Self> {
        let config = value::from_url(
            url,
            |base| PostgresConfig::new(base),
            PostgresConfig::with_option,
        )?;
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_is_taken() {
        let samples = [
            ("prefix", "app_jobs"),
            ("timeout", "2s"),
            ("connect_timeout", "1s"),
            ("lease", "10s"),
            ("poll_interval", "500ms"),
            ("max_connections", "4"),
            ("message_id_window", "1h"),
            ("sweep_interval", "30s"),
        ];
        assert_eq!(samples.len(), PostgresConfig::OPTIONS.len());
        let mut config = PostgresConfig::default();
        for (name, text) in samples {
            config = config.with_option(name, text).unwrap();
        }
        assert_eq!(config.schema, "app_jobs");
        assert_eq!(config.lease, Duration::from_secs(10));
        assert_eq!(config.max_connections, 4);
        config.validate().unwrap();
    }

    #[test]
    fn bad_values_are_named() {
        let err = "postgres://h/db?prefix=Bad-Name"
            .parse::<PostgresConfig>()
            .unwrap_err();
        assert!(err.to_string().contains("prefix"), "{err}");
        let err = "redis://h".parse::<PostgresConfig>().unwrap_err();
        assert!(err.to_string().contains("postgres://"), "{err}");
        let err = PostgresConfig::default()
            .with_option("leese", "1s")
            .unwrap_err();
        assert!(err.to_string().contains("lease"), "{err}");
    }
}
