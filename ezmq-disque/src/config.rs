//! `DisqueConfig`: seeds, credentials, timeouts and job defaults, with a
//! `disque://` URL form.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ezmq_core::spi::url_redaction::redact_password as redact;

use crate::error::DisqueError;

/// The port Disque listens on by default.
pub const DEFAULT_PORT: u16 = 7711;

/// Settings of a [`DisqueBackend`](crate::DisqueBackend).
///
/// Build it with [`Default`] and the `with_*` setters, or parse a URL
/// `disque://[:password@]host:port,host2:port2`:
///
/// ```
/// use std::time::Duration;
/// use ezmq_disque::DisqueConfig;
///
/// let a = DisqueConfig::default()
///     .with_seeds(["10.0.0.1:7711", "10.0.0.2:7711"])
///     .with_password("s3cret")
///     .with_default_retry(Duration::from_secs(60));
///
/// let b: DisqueConfig = "disque://:s3cret@10.0.0.1:7711,10.0.0.2:7711".parse().unwrap();
/// assert_eq!(a.seeds, b.seeds);
/// assert_eq!(b.password.as_deref(), Some("s3cret"));
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DisqueConfig {
    /// Addresses (`host:port`) to bootstrap from; the rest of the cluster is
    /// learned with `HELLO`. Default `["127.0.0.1:7711"]`.
    pub seeds: Vec<String>,
    /// Password sent with `AUTH` on every connection. Default none.
    pub password: Option<String>,
    /// Longest wait for a TCP connection (and its `AUTH`). Default 5 s.
    pub connect_timeout: Duration,
    /// Longest wait for the reply of a non-blocking command (`ACKJOB`,
    /// `QLEN`, ...). `ADDJOB` may take its own replication timeout on top;
    /// a blocking `GETJOB` its wait. Default 5 s.
    pub command_timeout: Duration,
    /// Copies of each job (`REPLICATE`) unless a push says otherwise.
    /// Default `None`: 2, or 1 when the cluster has a single node.
    pub default_replicate: Option<u32>,
    /// Time before an unacknowledged delivery is redelivered (`RETRY`)
    /// unless a push says otherwise. Default 30 s.
    pub default_retry: Duration,
    /// Time after which a job is dropped (`TTL`) unless a push says
    /// otherwise. Default 1 day.
    pub default_ttl: Duration,
    /// How long `ADDJOB` may wait for replication (its `ms-timeout`) unless
    /// a push sets [`DisquePushOptions::timeout`](crate::DisquePushOptions::timeout).
    /// Default 5 s.
    pub default_add_timeout: Duration,
    /// How often the node table is refreshed with `HELLO`. Default 5 s.
    pub refresh_interval: Duration,
    /// Attempts of one command across nodes before it fails (connection
    /// errors and `-LEAVING` move on to the next node). Default 3.
    pub max_attempts: u32,
    /// Wait before the first retry of a failed command; doubles per attempt,
    /// capped at 1 s. Default 100 ms.
    pub retry_backoff: Duration,
    /// Idle dedicated `GETJOB` connections kept per node (one is in use per
    /// concurrently running fetch; extra ones are closed). Default 8.
    pub getjob_pool_size: usize,
    /// Most connections per node for non-blocking commands (`ADDJOB`,
    /// `ACKJOB`, ...). A node answers one connection's commands strictly in
    /// order, so one slow command (a synchronous `ADDJOB` waiting for a
    /// replica that stopped answering) holds up every later one on that
    /// connection. Commands go down the node's first connection while its
    /// oldest unanswered command has waited less than 10 ms; when every
    /// open connection is held up longer, another one is opened, up to
    /// this many (a node that is merely busy keeps one). With one of three
    /// nodes stopped, about half of a healthy node's synchronous `ADDJOB`s
    /// take 80–90 ms on real Disque: at 500 pushes/s per node that is about
    /// 21 held-up connections, and the pushes failing over from the stopped
    /// node arrive in a burst, so the default leaves headroom. Default 64.
    pub connections_per_node: usize,
    /// How a hung node (one that accepts connections but answers nothing,
    /// e.g. a stopped process) is told from a slow one. A command still
    /// unanswered after this long makes the client `PING` the node on a
    /// fresh connection; when that `PING` gets no answer within this long
    /// either, the node is marked down: every command waiting on it fails
    /// over at once, its connections are dropped, and it is routed to only
    /// as a last resort until a background probe (every 250 ms) sees it
    /// answer again. A node found unreachable (refused, reset) is marked
    /// down the same way. Default 300 ms.
    pub hang_timeout: Duration,
}

impl Default for DisqueConfig {
    fn default() -> Self {
        DisqueConfig {
            seeds: vec![format!("127.0.0.1:{DEFAULT_PORT}")],
            password: None,
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
            default_replicate: None,
            default_retry: Duration::from_secs(30),
            default_ttl: Duration::from_secs(24 * 3600),
            default_add_timeout: Duration::from_secs(5),
            refresh_interval: Duration::from_secs(5),
            max_attempts: 3,
            retry_backoff: Duration::from_millis(100),
            getjob_pool_size: 8,
            connections_per_node: 64,
            hang_timeout: Duration::from_millis(300),
        }
    }
}

impl fmt::Debug for DisqueConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DisqueConfig")
            .field("seeds", &self.seeds)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("default_replicate", &self.default_replicate)
            .field("default_retry", &self.default_retry)
            .field("default_ttl", &self.default_ttl)
            .field("default_add_timeout", &self.default_add_timeout)
            .field("refresh_interval", &self.refresh_interval)
            .field("max_attempts", &self.max_attempts)
            .field("retry_backoff", &self.retry_backoff)
            .field("getjob_pool_size", &self.getjob_pool_size)
            .field("connections_per_node", &self.connections_per_node)
            .field("hang_timeout", &self.hang_timeout)
            .finish()
    }
}

impl DisqueConfig {
    /// Sets [`DisqueConfig::seeds`].
    #[must_use]
    pub fn with_seeds<I, S>(mut self, seeds: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.seeds = seeds.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`DisqueConfig::password`].
    #[must_use]
    pub fn with_password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Sets [`DisqueConfig::connect_timeout`].
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`DisqueConfig::command_timeout`].
    #[must_use]
    pub fn with_command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Sets [`DisqueConfig::default_replicate`].
    #[must_use]
    pub fn with_default_replicate(mut self, copies: u32) -> Self {
        self.default_replicate = Some(copies);
        self
    }

    /// Sets [`DisqueConfig::default_retry`].
    #[must_use]
    pub fn with_default_retry(mut self, retry: Duration) -> Self {
        self.default_retry = retry;
        self
    }

    /// Sets [`DisqueConfig::default_ttl`].
    #[must_use]
    pub fn with_default_ttl(mut self, ttl: Duration) -> Self {
        self.default_ttl = ttl;
        self
    }

    /// Sets [`DisqueConfig::default_add_timeout`].
    #[must_use]
    pub fn with_default_add_timeout(mut self, timeout: Duration) -> Self {
        self.default_add_timeout = timeout;
        self
    }

    /// Sets [`DisqueConfig::refresh_interval`].
    #[must_use]
    pub fn with_refresh_interval(mut self, interval: Duration) -> Self {
        self.refresh_interval = interval;
        self
    }

    /// Sets [`DisqueConfig::max_attempts`].
    #[must_use]
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Sets [`DisqueConfig::retry_backoff`].
    #[must_use]
    pub fn with_retry_backoff(mut self, backoff: Duration) -> Self {
        self.retry_backoff = backoff;
        self
    }

    /// Sets [`DisqueConfig::getjob_pool_size`].
    #[must_use]
    pub fn with_getjob_pool_size(mut self, size: usize) -> Self {
        self.getjob_pool_size = size;
        self
    }

    /// Sets [`DisqueConfig::connections_per_node`].
    ///
    /// ```
    /// use ezmq_disque::DisqueConfig;
    ///
    /// let config = DisqueConfig::default().with_connections_per_node(64);
    /// assert_eq!(config.connections_per_node, 64);
    /// assert!(DisqueConfig::default().with_connections_per_node(0).validate().is_err());
    /// ```
    #[must_use]
    pub fn with_connections_per_node(mut self, n: usize) -> Self {
        self.connections_per_node = n;
        self
    }

    /// Sets [`DisqueConfig::hang_timeout`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use ezmq_disque::DisqueConfig;
    ///
    /// // A busy cluster whose nodes may pause for a GC-like stall: be slower
    /// // to call a node hung.
    /// let config = DisqueConfig::default().with_hang_timeout(Duration::from_secs(1));
    /// assert_eq!(config.hang_timeout, Duration::from_secs(1));
    /// ```
    #[must_use]
    pub fn with_hang_timeout(mut self, timeout: Duration) -> Self {
        self.hang_timeout = timeout;
        self
    }

    /// Checks the values; [`DisqueBackend::connect`](crate::DisqueBackend::connect)
    /// calls it.
    pub fn validate(&self) -> Result<(), DisqueError> {
        if self.seeds.is_empty() {
            return Err(DisqueError::InvalidConfig {
                option: "seeds",
                reason: "at least one seed address is needed".into(),
            });
        }
        for seed in &self.seeds {
            parse_addr(seed)?;
        }
        let positive = [
            ("connect_timeout", self.connect_timeout),
            ("command_timeout", self.command_timeout),
            ("default_ttl", self.default_ttl),
            ("default_add_timeout", self.default_add_timeout),
            ("refresh_interval", self.refresh_interval),
            ("hang_timeout", self.hang_timeout),
        ];
        for (option, value) in positive {
            if value.is_zero() {
                return Err(DisqueError::InvalidConfig {
                    option,
                    reason: "must be positive".into(),
                });
            }
        }
        if self.default_retry.is_zero() {
            return Err(DisqueError::InvalidConfig {
                option: "default_retry",
                reason: "must be positive; use at-most-once pushes for no redelivery".into(),
            });
        }
        if self.default_replicate == Some(0) {
            return Err(DisqueError::InvalidConfig {
                option: "default_replicate",
                reason: "must be at least 1".into(),
            });
        }
        if self.connections_per_node == 0 {
            return Err(DisqueError::InvalidConfig {
                option: "connections_per_node",
                reason: "must be at least 1".into(),
            });
        }
        if self.max_attempts == 0 {
            return Err(DisqueError::InvalidConfig {
                option: "max_attempts",
                reason: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}

/// Splits `host:port` (`[v6]:port` for IPv6); a missing port means 7711.
pub(crate) fn parse_addr(addr: &str) -> Result<(String, u16), DisqueError> {
    let bad = |reason: &str| DisqueError::InvalidAddress {
        addr: addr.to_owned(),
        reason: reason.to_owned(),
    };
    let addr_trim = addr.trim();
    if addr_trim.is_empty() {
        return Err(bad("empty address"));
    }
    let (host, port) = if let Some(rest) = addr_trim.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(|| bad("missing `]`"))?;
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return Err(bad("unexpected text after `]`")),
        }
    } else {
        match addr_trim.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (addr_trim, None),
        }
    };
    if host.is_empty() {
        return Err(bad("empty host"));
    }
    if host.contains(|c: char| c.is_whitespace() || "/@?#".contains(c)) {
        return Err(bad("invalid character in host"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| bad("port must be a number from 1 to 65535"))?,
    };
    Ok((host.to_owned(), port))
}

fn percent_decode(s: &str, url: &str) -> Result<String, DisqueError> {
    ezmq_core::spi::option_value::percent_decode(s).ok_or_else(|| DisqueError::InvalidUrl {
        url: redact(url),
        reason: "bad percent-encoding in the password, or not UTF-8 once decoded".into(),
    })
}

impl FromStr for DisqueConfig {
    type Err = DisqueError;

    /// Parses `disque://[:password@]host:port[,host2:port2...]`; a host
    /// without a port uses 7711, the password is percent-decoded. Settings
    /// go in the query string (`?replicate=2&retry=30s`, the names of
    /// [`DisqueConfig::OPTIONS`]); every other one keeps its default.
    fn from_str(url: &str) -> Result<Self, DisqueError> {
        let (base, pairs) = ezmq_core::spi::option_value::split_query(url)
            .map_err(|e| crate::url_options::option_error(e, redact(url)))?;
        let mut config = Self::from_base_url(base)?;
        for (name, text) in pairs {
            config = config
                .with_option(&name, &text)
                .map_err(|e| crate::url_options::option_error(e, redact(url)))?;
        }
        Ok(config)
    }
}

impl DisqueConfig {
    /// [`FromStr`] for a URL without a query string.
    fn from_base_url(url: &str) -> Result<Self, DisqueError> {
        let invalid = |reason: &str| DisqueError::InvalidUrl {
            url: redact(url),
            reason: reason.to_owned(),
        };
        let rest = url
            .strip_prefix("disque://")
            .ok_or_else(|| invalid("must start with `disque://`"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err(invalid("paths and fragments are not supported"));
        }
        let (password, hosts) = match rest.rsplit_once('@') {
            Some((userinfo, hosts)) => {
                let pass = userinfo
                    .strip_prefix(':')
                    .ok_or_else(|| invalid("use `:password@`; user names are not supported"))?;
                if pass.is_empty() {
                    (None, hosts)
                } else {
                    (Some(percent_decode(pass, url)?), hosts)
                }
            }
            None => (None, rest),
        };
        if hosts.is_empty() {
            return Err(invalid("no host given"));
        }
        let mut seeds = Vec::new();
        for part in hosts.split(',') {
            let (host, port) = parse_addr(part).map_err(|e| DisqueError::InvalidUrl {
                url: redact(url),
                reason: e.to_string(),
            })?;
            if host.contains(':') {
                seeds.push(format!("[{host}]:{port}"));
            } else {
                seeds.push(format!("{host}:{port}"));
            }
        }
        Ok(DisqueConfig {
            seeds,
            password,
            ..DisqueConfig::default()
        })
    }
}

impl TryFrom<&str> for DisqueConfig {
    type Error = DisqueError;

    fn try_from(url: &str) -> Result<Self, DisqueError> {
        url.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        let c: DisqueConfig = "disque://127.0.0.1:7711".parse().unwrap();
        assert_eq!(c.seeds, ["127.0.0.1:7711"]);
        assert_eq!(c.password, None);

        let c: DisqueConfig = "disque://:p%40ss%3Aw@a:1,b:2,c/".parse().unwrap();
        assert_eq!(c.seeds, ["a:1", "b:2", "c:7711"]);
        assert_eq!(c.password.as_deref(), Some("p@ss:w"));

        let c = DisqueConfig::try_from("disque://[::1]:7712").unwrap();
        assert_eq!(c.seeds, ["[::1]:7712"]);
    }

    #[test]
    fn rejects_bad_urls_clearly() {
        let cases = [
            ("redis://a:1", "disque://"),
            ("disque://", "no host"),
            ("disque://a:99999", "port"),
            ("disque://a:1,,b:2", "empty address"),
            ("disque://user:pw@a:1", "user names"),
            ("disque://:p%zz@a:1", "percent"),
            ("disque://a:1/db", "paths"),
        ];
        for (url, needle) in cases {
            let err = url.parse::<DisqueConfig>().unwrap_err().to_string();
            assert!(err.contains(needle), "{url}: {err}");
        }
        let err = "disque://:secret@a:x".parse::<DisqueConfig>().unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
    }

    #[test]
    fn debug_redacts_password() {
        let c = DisqueConfig::default().with_password("hunter2");
        assert!(!format!("{c:?}").contains("hunter2"));
    }

    #[test]
    fn validation() {
        assert!(DisqueConfig::default().validate().is_ok());
        assert!(DisqueConfig::default()
            .with_seeds(Vec::<String>::new())
            .validate()
            .is_err());
        assert!(DisqueConfig::default()
            .with_seeds(["a:0"])
            .validate()
            .is_err());
        assert!(DisqueConfig::default()
            .with_default_retry(Duration::ZERO)
            .validate()
            .is_err());
    }
}
