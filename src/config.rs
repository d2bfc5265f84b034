//! `Config`: the broker URL and every setting of a client, from code, from
//! the URL's query string, or from `EZMQ_*` environment variables.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ezmq_core::spi::option_value;
use ezmq_core::{Client, Error, Result};

use crate::connect::redact;
use crate::settings::Plan;

/// The environment variable with the broker URL.
pub const URL_ENV: &str = "EZMQ_URL";

/// The environment variable with how long [`Config::connect`] keeps trying
/// while the broker is not up yet (`30s`, `500ms`, `2m`, or seconds).
pub const CONNECT_RETRY_ENV: &str = "EZMQ_CONNECT_RETRY";

/// The settings every backend takes, by name: in a URL's query string
/// (`?prefix=app&max_payload=16MiB`) or as `EZMQ_<NAME>` variables. Each
/// backend adds its own (`ezmq::redis::RedisConfig::OPTIONS`, ...); the
/// whole table is in `docs/configuration.md`.
pub const COMMON_OPTIONS: &[&str] = &[
    "max_payload",
    "connect_retry",
    "prefix",
    "timeout",
    "connect_timeout",
];

/// Longest pause between two connection attempts.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// A typed section of one backend's settings, applied last.
pub(crate) type Section<C> = Arc<dyn Fn(C) -> C + Send + Sync>;

/// How a service reaches its broker, and every setting of its client: the
/// URL ([`connect_url`](crate::connect_url) picks the backend from it),
/// the settings every backend shares (payload limit, name prefix,
/// timeouts, connect retry), and each backend's own through a typed
/// section ([`Config::with_redis`], [`Config::with_rabbitmq`],
/// [`Config::with_disque`]).
///
/// The same settings can come from three places; for each one, **code
/// wins over the URL's query string, which wins over an `EZMQ_*`
/// variable**:
///
/// - code: `Config::new(url).with_prefix("app")`;
/// - the URL: `redis://127.0.0.1:6379/0?prefix=app&max_payload=16MiB`;
/// - the environment ([`Config::from_env`], [`Config::with_env`]):
///   `EZMQ_URL`, `EZMQ_PREFIX=app`, `EZMQ_MAX_PAYLOAD=16MiB`.
///
/// An unknown name in the URL, or a value that does not parse, fails
/// [`Config::connect`] before anything connects, with
/// [`Error::InvalidOption`] naming the setting.
///
/// ```no_run
/// # async fn demo() -> ezmq::Result<()> {
/// use std::time::Duration;
///
/// // In code:
/// let client = ezmq::Config::new("redis://127.0.0.1:6379")
///     .with_prefix("signup")
///     .with_max_payload_bytes(16 << 20)
///     .with_connect_retry(Duration::from_secs(30))
///     .with_redis(|redis| redis.with_lease(Duration::from_secs(60)))
///     .connect()
///     .await?;
/// // The same in the URL:
/// let client = ezmq::connect_url(
///     "redis://127.0.0.1:6379?prefix=signup&max_payload=16MiB&connect_retry=30s&lease=60s",
/// )
/// .await?;
/// // Or from EZMQ_URL and the other EZMQ_* variables:
/// let client = ezmq::Config::from_env()?.connect().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Config {
    /// The broker URL (`disque://`, `redis://`, `redis+cluster://`,
    /// `amqp://`, `postgres://`, `nats://`, `kafka://`), optionally with settings in its query
    /// string.
    pub url: String,
    /// Keep retrying a connection that fails with a retryable error
    /// (refused, timed out) for this long. Default `None`: fail at once.
    /// Failures only a configuration change fixes (credentials, unknown
    /// virtual host or database, another protocol at the port) fail at
    /// once regardless. Name `connect_retry`.
    pub connect_retry: Option<Duration>,
    /// Largest body a push accepts, in bytes. Default 1 MiB. Name
    /// `max_payload` (`16MiB`, `512KiB`, `1048576`).
    pub max_payload_bytes: Option<usize>,
    /// Prefix of every name ezmq creates on the broker (Redis keys,
    /// RabbitMQ queues and exchanges), so services can share one broker.
    /// Disque has none and refuses it. Name `prefix`.
    pub prefix: Option<String>,
    /// Bound of one request to the broker once connected (Redis and
    /// Disque command timeout, RabbitMQ operation timeout). Name
    /// `timeout`.
    pub timeout: Option<Duration>,
    /// Bound of one connection attempt. Name `connect_timeout`.
    pub connect_timeout: Option<Duration>,
    /// Settings read from `EZMQ_*` variables, below the URL's and code's.
    pub(crate) env: Vec<(String, String)>,
    #[cfg(feature = "disque")]
    pub(crate) disque: Option<Section<ezmq_disque::DisqueConfig>>,
    #[cfg(feature = "redis")]
    pub(crate) redis: Option<Section<ezmq_redis::RedisConfig>>,
    #[cfg(feature = "rabbitmq")]
    pub(crate) rabbitmq: Option<Section<ezmq_rabbitmq::RabbitConfig>>,
    #[cfg(feature = "postgres")]
    pub(crate) postgres: Option<Section<ezmq_postgres::PostgresConfig>>,
    #[cfg(feature = "nats")]
    pub(crate) nats: Option<Section<ezmq_nats::NatsConfig>>,
    #[cfg(feature = "kafka")]
    pub(crate) kafka: Option<Section<ezmq_kafka::KafkaConfig>>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("url", &redact(&self.url))
            .field("connect_retry", &self.connect_retry)
            .field("max_payload_bytes", &self.max_payload_bytes)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("env", &self.env)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// A config for `url`, failing at once when the broker is down.
    pub fn new(url: impl Into<String>) -> Self {
        Config {
            url: url.into(),
            connect_retry: None,
            max_payload_bytes: None,
            prefix: None,
            timeout: None,
            connect_timeout: None,
            env: Vec::new(),
            #[cfg(feature = "disque")]
            disque: None,
            #[cfg(feature = "redis")]
            redis: None,
            #[cfg(feature = "rabbitmq")]
            rabbitmq: None,
            #[cfg(feature = "postgres")]
            postgres: None,
            #[cfg(feature = "nats")]
            nats: None,
            #[cfg(feature = "kafka")]
            kafka: None,
        }
    }

    /// Sets [`Config::connect_retry`].
    #[must_use]
    pub fn with_connect_retry(mut self, wait: Duration) -> Self {
        self.connect_retry = Some(wait);
        self
    }

    /// Sets [`Config::max_payload_bytes`].
    #[must_use]
    pub fn with_max_payload_bytes(mut self, max: usize) -> Self {
        self.max_payload_bytes = Some(max);
        self
    }

    /// Sets [`Config::prefix`].
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// Sets [`Config::timeout`].
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets [`Config::connect_timeout`].
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// The Redis backend's own settings, applied after the URL's:
    /// `.with_redis(|redis| redis.with_lease(Duration::from_secs(60)))`.
    /// Ignored for another backend's URL.
    #[cfg(feature = "redis")]
    #[must_use]
    pub fn with_redis(
        mut self,
        section: impl Fn(ezmq_redis::RedisConfig) -> ezmq_redis::RedisConfig + Send + Sync + 'static,
    ) -> Self {
        self.redis = Some(Arc::new(section));
        self
    }

    /// The RabbitMQ backend's own settings, applied after the URL's:
    /// `.with_rabbitmq(|amqp| amqp.with_prefetch(50))`. Ignored for another
    /// backend's URL.
    #[cfg(feature = "rabbitmq")]
    #[must_use]
    pub fn with_rabbitmq(
        mut self,
        section: impl Fn(ezmq_rabbitmq::RabbitConfig) -> ezmq_rabbitmq::RabbitConfig
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.rabbitmq = Some(Arc::new(section));
        self
    }

    /// The PostgreSQL backend's own settings, applied after the URL's:
    /// `.with_postgres(|pg| pg.with_max_connections(20))`. Ignored for
    /// another backend's URL.
    #[cfg(feature = "postgres")]
    #[must_use]
    pub fn with_postgres(
        mut self,
        section: impl Fn(ezmq_postgres::PostgresConfig) -> ezmq_postgres::PostgresConfig
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.postgres = Some(Arc::new(section));
        self
    }

    /// The NATS backend's own settings, applied after the URL's:
    /// `.with_nats(|nats| nats.with_replicas(3))`. Ignored for another
    /// backend's URL.
    #[cfg(feature = "nats")]
    #[must_use]
    pub fn with_nats(
        mut self,
        section: impl Fn(ezmq_nats::NatsConfig) -> ezmq_nats::NatsConfig + Send + Sync + 'static,
    ) -> Self {
        self.nats = Some(Arc::new(section));
        self
    }

    /// The Kafka backend's own settings, applied after the URL's:
    /// `.with_kafka(|kafka| kafka.with_partitions(12))`. Ignored for
    /// another backend's URL.
    #[cfg(feature = "kafka")]
    #[must_use]
    pub fn with_kafka(
        mut self,
        section: impl Fn(ezmq_kafka::KafkaConfig) -> ezmq_kafka::KafkaConfig + Send + Sync + 'static,
    ) -> Self {
        self.kafka = Some(Arc::new(section));
        self
    }

    /// The Disque backend's own settings, applied after the URL's:
    /// `.with_disque(|disque| disque.with_default_replicate(2))`. Ignored for
    /// another backend's URL.
    #[cfg(feature = "disque")]
    #[must_use]
    pub fn with_disque(
        mut self,
        section: impl Fn(ezmq_disque::DisqueConfig) -> ezmq_disque::DisqueConfig + Send + Sync + 'static,
    ) -> Self {
        self.disque = Some(Arc::new(section));
        self
    }

    /// Reads [`URL_ENV`] (required) and every other setting from its
    /// `EZMQ_<NAME>` variable ([`Config::with_env`]). Fails with
    /// [`Error::InvalidOption`] naming the variable when `EZMQ_URL` is
    /// missing.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Adds the settings of `EZMQ_<NAME>` variables (`EZMQ_PREFIX`,
    /// `EZMQ_MAX_PAYLOAD`, `EZMQ_CONNECT_RETRY`, a backend's own such as
    /// `EZMQ_LEASE`), below those of the URL and of code. A variable for
    /// another backend's setting is ignored; a value that does not parse
    /// fails [`Config::connect`] naming the variable.
    #[must_use]
    pub fn with_env(self) -> Self {
        self.with_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let url = get(URL_ENV)
            .filter(|u| !u.trim().is_empty())
            .ok_or_else(|| {
                Error::invalid_option(
                    "url",
                    format!(
                        "{URL_ENV} is not set; set it to the broker URL, e.g. \
                     {URL_ENV}=redis://127.0.0.1:6379"
                    ),
                )
            })?;
        Ok(Config::new(url.trim()).with_lookup(get))
    }

    fn with_lookup(mut self, get: impl Fn(&str) -> Option<String>) -> Self {
        for name in crate::settings::every_option_name() {
            if let Some(value) = get(&option_value::env_var(name)).filter(|v| !v.trim().is_empty())
            {
                self.env.push((name.to_owned(), value.trim().to_owned()));
            }
        }
        self
    }

    /// Connects; with [`Config::connect_retry`], retries retryable failures
    /// (pausing 100 ms, doubling to 5 s) until it has passed, logging each
    /// failed attempt, then returns the last error. Every setting is
    /// checked first: a bad one fails at once, before any connection.
    pub async fn connect(&self) -> Result<Client> {
        let plan = Plan::of(self)?;
        let Some(wait) = plan.connect_retry else {
            return plan.connect().await;
        };
        let deadline = tokio::time::Instant::now() + wait.min(Duration::from_secs(86_400));
        let mut pause = Duration::from_millis(100);
        let mut attempt = 1u32;
        loop {
            match plan.connect().await {
                Ok(client) => return Ok(client),
                Err(err) if err.is_retryable() => {
                    let now = tokio::time::Instant::now();
                    if now + pause > deadline {
                        return Err(err);
                    }
                    tracing::warn!(attempt, cause = %err, retry_in = ?pause,
                        "broker not reachable yet; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn reads_the_environment() {
        let c = Config::from_lookup(env(&[
            (URL_ENV, "redis://:pw@127.0.0.1:6379"),
            (CONNECT_RETRY_ENV, "30s"),
            ("EZMQ_PREFIX", "app"),
            ("EZMQ_NOT_A_SETTING", "x"),
        ]))
        .unwrap();
        assert_eq!(c.url, "redis://:pw@127.0.0.1:6379");
        assert!(c.env.contains(&("connect_retry".into(), "30s".into())));
        assert!(c.env.contains(&("prefix".into(), "app".into())));
        assert_eq!(c.env.len(), 2);
        assert!(!format!("{c:?}").contains("pw"), "{c:?}");

        let err = Config::from_lookup(env(&[])).unwrap_err();
        assert!(err.to_string().contains("EZMQ_URL is not set"), "{err}");
    }
}
