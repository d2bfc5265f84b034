//! `RedisConfig`: where Redis is and how the backend uses it.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ezmq_core::{Error, Result};

/// The URL used when none is given.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// Settings of a [`RedisBackend`](crate::RedisBackend). Every field has a
/// documented default; set them with the `with_*` methods.
///
/// ```
/// use std::time::Duration;
/// use ezmq_redis::RedisConfig;
///
/// let config: RedisConfig = "redis://:secret@10.0.0.5:6380/2".parse().unwrap();
/// assert!(!config.cluster);
/// let config = config
///     .with_lease(Duration::from_secs(60))
///     .with_wait_replicas(1, Duration::from_millis(200));
/// assert_eq!(config.lease, Duration::from_secs(60));
///
/// let cluster: RedisConfig = "redis+cluster://10.0.0.1:7000,10.0.0.2:7000".parse().unwrap();
/// assert!(cluster.cluster);
/// assert_eq!(cluster.urls, ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"]);
/// ```
///
/// Its `Debug` output redacts the passwords in the URLs
/// (`redis://:***@host:6379`), as do every error and log line of this
/// backend.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisConfig {
    /// Server URLs, `redis://[:password@]host:port[/db]`. One URL for a
    /// single server; the seed nodes for a cluster. Default
    /// `redis://127.0.0.1:6379`.
    pub urls: Vec<String>,
    /// True to talk to a Redis Cluster (the URL form `redis+cluster://`).
    /// Default `false`.
    pub cluster: bool,
    /// How long a received message stays with its consumer without a lease
    /// extension before another consumer reclaims it (`XAUTOCLAIM` min idle
    /// time). Default 30 s, like Disque's retry window.
    pub lease: Duration,
    /// How often a receiving consumer looks for entries whose lease ended
    /// (`XAUTOCLAIM`). Default 1 s.
    pub reclaim_interval: Duration,
    /// The longest one blocking `XREADGROUP` waits, and so how often a
    /// waiting consumer looks for delayed messages that came due. Bounds
    /// the lateness of delayed messages pushed by other processes.
    /// Default 100 ms.
    pub block_wait: Duration,
    /// After each push, `WAIT numreplicas timeout`: the push fails
    /// (retryably) unless that many replicas acknowledged it in time.
    /// Default `None` (return once the primary stored it).
    pub wait_replicas: Option<(u32, Duration)>,
    /// `MAXLEN ~` cap of topic streams. Default `None`: a topic stream
    /// only holds waiting and in-flight messages (acknowledged entries are
    /// deleted), and a cap would drop waiting messages.
    pub stream_max_len: Option<u64>,
    /// `MAXLEN ~` cap of broadcast streams (which are also trimmed by the
    /// longest group retention with `MINID ~`). Default 100 000.
    pub broadcast_max_len: u64,
    /// Retention of a broadcast group recreated after its stream vanished
    /// (a server restart without persistence) when this client never
    /// joined it. Default 1 h.
    pub default_group_retention: Duration,
    /// Prefix of every key. Default `ezmq`.
    pub key_prefix: String,
    /// Timeout of one non-blocking command. Default 5 s.
    pub command_timeout: Duration,
    /// Timeout of one connection attempt. Default 5 s.
    pub connect_timeout: Duration,
    /// The consumer name of this backend instance in consumer groups.
    /// Default `None`: a fresh UUID per instance (it must be unique).
    pub consumer_name: Option<String>,
    /// How long a push's message id
    /// ([`PushOptions::with_message_id`](ezmq_core::PushOptions::with_message_id))
    /// is remembered: another push to the same topic with that id within
    /// the window stores nothing and returns the first push's job id
    /// (whether or not the job was consumed since). Costs one small key
    /// per id (`<prefix>:{<topic>}:msgid:<id>`) for the window; pushes
    /// without a message id cost nothing extra. Default 24 h.
    pub message_id_window: Duration,
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let RedisConfig {
            urls,
            cluster,
            lease,
            reclaim_interval,
            block_wait,
            wait_replicas,
            stream_max_len,
            broadcast_max_len,
            default_group_retention,
            key_prefix,
            command_timeout,
            connect_timeout,
            consumer_name,
            message_id_window,
        } = self;
        let urls: Vec<String> = urls.iter().map(|u| redact(u)).collect();
        f.debug_struct("RedisConfig")
            .field("urls", &urls)
            .field("cluster", cluster)
            .field("lease", lease)
            .field("reclaim_interval", reclaim_interval)
            .field("block_wait", block_wait)
            .field("wait_replicas", wait_replicas)
            .field("stream_max_len", stream_max_len)
            .field("broadcast_max_len", broadcast_max_len)
            .field("default_group_retention", default_group_retention)
            .field("key_prefix", key_prefix)
            .field("command_timeout", command_timeout)
            .field("connect_timeout", connect_timeout)
            .field("consumer_name", consumer_name)
            .field("message_id_window", message_id_window)
            .finish()
    }
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            urls: vec![DEFAULT_URL.to_owned()],
            cluster: false,
            lease: Duration::from_secs(30),
            reclaim_interval: Duration::from_secs(1),
            block_wait: Duration::from_millis(100),
            wait_replicas: None,
            stream_max_len: None,
            broadcast_max_len: 100_000,
            default_group_retention: Duration::from_secs(3600),
            key_prefix: "ezmq".to_owned(),
            command_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            consumer_name: None,
            message_id_window: Duration::from_secs(24 * 3600),
        }
    }
}

impl RedisConfig {
    /// A single-server configuration for `url`
    /// (`redis://[:password@]host:port[/db]`).
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            urls: vec![url.into()],
            ..Self::default()
        }
    }

    /// A Redis Cluster configuration with these seed node URLs.
    pub fn cluster<I, S>(urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        RedisConfig {
            urls: urls.into_iter().map(Into::into).collect(),
            cluster: true,
            ..Self::default()
        }
    }

    /// Sets [`RedisConfig::lease`].
    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets [`RedisConfig::reclaim_interval`].
    #[must_use]
    pub fn with_reclaim_interval(mut self, interval: Duration) -> Self {
        self.reclaim_interval = interval;
        self
    }

    /// Sets [`RedisConfig::block_wait`].
    #[must_use]
    pub fn with_block_wait(mut self, wait: Duration) -> Self {
        self.block_wait = wait;
        self
    }

    /// Sets [`RedisConfig::wait_replicas`]: `WAIT replicas timeout` after
    /// each push.
    #[must_use]
    pub fn with_wait_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.wait_replicas = Some((replicas, timeout));
        self
    }

    /// Sets [`RedisConfig::stream_max_len`].
    #[must_use]
    pub fn with_stream_max_len(mut self, max_len: Option<u64>) -> Self {
        self.stream_max_len = max_len;
        self
    }

    /// Sets [`RedisConfig::broadcast_max_len`].
    #[must_use]
    pub fn with_broadcast_max_len(mut self, max_len: u64) -> Self {
        self.broadcast_max_len = max_len;
        self
    }

    /// Sets [`RedisConfig::default_group_retention`].
    #[must_use]
    pub fn with_default_group_retention(mut self, retention: Duration) -> Self {
        self.default_group_retention = retention;
        self
    }

    /// Sets [`RedisConfig::key_prefix`].
    #[must_use]
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Sets [`RedisConfig::command_timeout`].
    #[must_use]
    pub fn with_command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Sets [`RedisConfig::connect_timeout`].
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`RedisConfig::consumer_name`].
    #[must_use]
    pub fn with_consumer_name(mut self, name: impl Into<String>) -> Self {
        self.consumer_name = Some(name.into());
        self
    }

    /// Sets [`RedisConfig::message_id_window`].
    #[must_use]
    pub fn with_message_id_window(mut self, window: Duration) -> Self {
        self.message_id_window = window;
        self
    }

    /// The URLs with their passwords redacted, comma separated: what errors
    /// and logs show.
    pub(crate) fn redacted_urls(&self) -> String {
        self.urls
            .iter()
            .map(|u| redact(u))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Checks the values that cannot work.
    pub fn validate(&self) -> Result<()> {
        if self.urls.is_empty() {
            return Err(Error::invalid_option("urls", "at least one URL is needed"));
        }
        if !self.cluster && self.urls.len() > 1 {
            return Err(Error::invalid_option(
                "urls",
                "several URLs need the cluster mode (redis+cluster://)",
            ));
        }
        if self.lease < Duration::from_millis(100) {
            return Err(Error::invalid_option("lease", "must be at least 100 ms"));
        }
        for (name, value) in [
            ("reclaim_interval", self.reclaim_interval),
            ("block_wait", self.block_wait),
            ("command_timeout", self.command_timeout),
            ("connect_timeout", self.connect_timeout),
            ("message_id_window", self.message_id_window),
        ] {
            if value < Duration::from_millis(1) {
                return Err(Error::invalid_option(name, "must be at least 1 ms"));
            }
        }
        if self.key_prefix.contains(['{', '}']) {
            return Err(Error::invalid_option(
                "key_prefix",
                "must not contain `{` or `}` (hash tags are the topic's)",
            ));
        }
        if self.consumer_name.as_deref().is_some_and(str::is_empty) {
            return Err(Error::invalid_option("consumer_name", "must not be empty"));
        }
        Ok(())
    }
}

impl FromStr for RedisConfig {
    type Err = Error;

    /// Parses `redis://[:password@]host:port[/db]` (single server) or
    /// `redis+cluster://[:password@]host:port,host:port` (cluster seeds),
    /// with settings in the query string (`?prefix=app&lease=30s`, the
    /// names of [`RedisConfig::OPTIONS`]).
    fn from_str(url: &str) -> Result<Self> {
        let (base, pairs) = ezmq_core::spi::option_value::split_query(url)?;
        let mut config = Self::from_base_url(base)?;
        for (name, text) in pairs {
            config = config.with_option(&name, &text)?;
        }
        Ok(config)
    }
}

impl RedisConfig {
    /// [`FromStr`] for a URL without a query string.
    fn from_base_url(url: &str) -> Result<Self> {
        if let Some(rest) = url.strip_prefix("redis+cluster://") {
            let (auth, hosts) = match rest.rsplit_once('@') {
                Some((auth, hosts)) => (Some(auth), hosts),
                None => (None, rest),
            };
            let urls: Vec<String> = hosts
                .split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(|host| match auth {
                    Some(auth) => format!("redis://{auth}@{host}"),
                    None => format!("redis://{host}"),
                })
                .collect();
            if urls.is_empty() {
                return Err(Error::invalid_option(
                    "url",
                    format!("no host in {:?}", redact(url)),
                ));
            }
            if hosts.contains('/') {
                return Err(Error::invalid_option(
                    "url",
                    "a Redis Cluster has only database 0: no `/db` in a redis+cluster:// URL",
                ));
            }
            return Ok(RedisConfig::cluster(urls));
        }
        if url.starts_with("redis://") {
            if url.contains(',') {
                return Err(Error::invalid_option(
                    "url",
                    "several hosts need the redis+cluster:// scheme",
                ));
            }
            return Ok(RedisConfig::new(url));
        }
        Err(Error::invalid_option(
            "url",
            format!(
                "{:?} is not a redis:// or redis+cluster:// URL (rediss:// needs TLS, which this build lacks)",
                redact(url)
            ),
        ))
    }
}

/// `url` with its password replaced by `***`, for errors, logs and `Debug`
/// (core's [`redact_password`](ezmq_core::spi::url_redaction::redact_password):
/// the password of `user:password@`, and `pass` and `password` query
/// parameters of Unix-socket URLs). User info without a `:` is hidden too,
/// as some write the password there (`redis://secret@h`).
pub(crate) fn redact(url: &str) -> String {
    use ezmq_core::spi::url_redaction::redact_password;
    match url.split_once("://") {
        Some((scheme, rest)) if rest.rfind('@').is_some_and(|at| !rest[..at].contains(':')) => {
            redact_password(&format!("{scheme}://:{rest}"))
        }
        _ => redact_password(url),
    }
}

impl TryFrom<&str> for RedisConfig {
    type Error = Error;

    fn try_from(url: &str) -> Result<Self> {
        url.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_url_forms() {
        let c: RedisConfig = "redis://127.0.0.1:6379/3".parse().unwrap();
        assert_eq!(c.urls, ["redis://127.0.0.1:6379/3"]);
        let c: RedisConfig = "redis+cluster://:pw@a:1,b:2".parse().unwrap();
        assert_eq!(c.urls, ["redis://:pw@a:1", "redis://:pw@b:2"]);
        assert!(c.cluster);
        assert!("amqp://x".parse::<RedisConfig>().is_err());
        assert!("redis://a:1,b:2".parse::<RedisConfig>().is_err());
        assert!("redis+cluster://".parse::<RedisConfig>().is_err());
        let c: RedisConfig = "redis://:pw@h:6379/2?prefix=app&lease=10s".parse().unwrap();
        assert_eq!(c.urls, ["redis://:pw@h:6379/2"]);
        assert_eq!(
            (c.key_prefix.as_str(), c.lease),
            ("app", Duration::from_secs(10))
        );
        let err = "redis://h?lease=soon".parse::<RedisConfig>().unwrap_err();
        assert!(err.to_string().contains("`lease`"), "{err}");
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("redis://:hunter2@h:6379/2"), "redis://:***@h:6379/2");
        assert_eq!(redact("rediss://u:p@ss@h:1"), "rediss://u:***@h:1");
        assert_eq!(redact("redis://secret@h"), "redis://:***@h");
        assert_eq!(redact("redis://h:6379"), "redis://h:6379");
        assert_eq!(
            redact("redis+unix:///tmp/r.sock?db=1&pass=pw"),
            "redis+unix:///tmp/r.sock?db=1&pass=***"
        );
        let c: RedisConfig = "redis+cluster://:pw@a:1,b:2".parse().unwrap();
        assert_eq!(c.redacted_urls(), "redis://:***@a:1,redis://:***@b:2");
        let debug = format!("{c:?}");
        assert!(!debug.contains("pw"), "{debug}");
        let err = "rediss+x://:pw@a".parse::<RedisConfig>().unwrap_err();
        assert!(!err.to_string().contains("pw"), "{err}");
    }

    #[test]
    fn validates() {
        assert!(RedisConfig::default().validate().is_ok());
        assert!(RedisConfig::default()
            .with_key_prefix("a{b")
            .validate()
            .is_err());
        assert!(RedisConfig::default()
            .with_lease(Duration::ZERO)
            .validate()
            .is_err());
    }
}
