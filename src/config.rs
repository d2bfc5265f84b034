//! `Config`: the broker URL and start-up behaviour, from code or from the
//! environment.

use std::fmt;
use std::time::Duration;

use ezmq_core::{Client, Error, Result};

use crate::connect::{connect_url, redact};

/// The environment variable with the broker URL.
pub const URL_ENV: &str = "EZMQ_URL";

/// The environment variable with how long [`Config::connect`] keeps trying
/// while the broker is not up yet (`30s`, `500ms`, `2m`, or seconds).
pub const CONNECT_RETRY_ENV: &str = "EZMQ_CONNECT_RETRY";

/// Longest pause between two connection attempts.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// How a service reaches its broker: the URL ([`connect_url`] picks the
/// backend from it) and how long to keep trying at start-up, so a service
/// started before its broker waits instead of crash-looping.
///
/// ```no_run
/// # async fn demo() -> ezmq::Result<()> {
/// use std::time::Duration;
///
/// // In code:
/// let client = ezmq::Config::new("redis://127.0.0.1:6379")
///     .with_connect_retry(Duration::from_secs(30))
///     .connect()
///     .await?;
/// // Or from EZMQ_URL and EZMQ_CONNECT_RETRY:
/// let client = ezmq::Config::from_env()?.connect().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The broker URL (`disque://`, `redis://`, `redis+cluster://`,
    /// `amqp://`).
    pub url: String,
    /// Keep retrying a connection that fails with a retryable error
    /// (refused, timed out) for this long. Default `None`: fail at once.
    /// Rejected credentials and bad URLs fail at once regardless.
    pub connect_retry: Option<Duration>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("url", &redact(&self.url))
            .field("connect_retry", &self.connect_retry)
            .finish()
    }
}

impl Config {
    /// A config for `url`, failing at once when the broker is down.
    pub fn new(url: impl Into<String>) -> Self {
        Config {
            url: url.into(),
            connect_retry: None,
        }
    }

    /// Sets [`Config::connect_retry`].
    #[must_use]
    pub fn with_connect_retry(mut self, wait: Duration) -> Self {
        self.connect_retry = Some(wait);
        self
    }

    /// Reads [`URL_ENV`] (required) and [`CONNECT_RETRY_ENV`] (optional).
    /// Fails with [`Error::InvalidOption`] naming the variable when one is
    /// missing or malformed.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
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
        let mut config = Config::new(url.trim());
        if let Some(wait) = get(CONNECT_RETRY_ENV).filter(|w| !w.trim().is_empty()) {
            let parsed = parse_duration(wait.trim()).ok_or_else(|| {
                Error::invalid_option(
                    "connect_retry",
                    format!(
                        "{CONNECT_RETRY_ENV}={wait:?} is not a duration such as 30s, 500ms or 2m"
                    ),
                )
            })?;
            config.connect_retry = Some(parsed);
        }
        Ok(config)
    }

    /// Connects; with [`Config::connect_retry`], retries retryable failures
    /// (pausing 100 ms, doubling to 5 s) until it has passed, logging each
    /// failed attempt, then returns the last error.
    pub async fn connect(&self) -> Result<Client> {
        let Some(wait) = self.connect_retry else {
            return connect_url(&self.url).await;
        };
        let deadline = tokio::time::Instant::now() + wait.min(Duration::from_secs(86_400));
        let mut pause = Duration::from_millis(100);
        let mut attempt = 1u32;
        loop {
            match connect_url(&self.url).await {
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

/// `30s`, `500ms`, `2m`, `1h`, or plain seconds.
fn parse_duration(text: &str) -> Option<Duration> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().ok()?;
    match unit.trim() {
        "" | "s" => Some(Duration::from_secs(n)),
        "ms" => Some(Duration::from_millis(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs),
        "h" => n.checked_mul(3600).map(Duration::from_secs),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
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
        ]))
        .unwrap();
        assert_eq!(c.url, "redis://:pw@127.0.0.1:6379");
        assert_eq!(c.connect_retry, Some(Duration::from_secs(30)));
        assert!(!format!("{c:?}").contains("pw"), "{c:?}");

        let err = Config::from_lookup(env(&[])).unwrap_err();
        assert!(err.to_string().contains("EZMQ_URL is not set"), "{err}");
        let err = Config::from_lookup(env(&[(URL_ENV, "x://"), (CONNECT_RETRY_ENV, "soon")]))
            .unwrap_err();
        assert!(err.to_string().contains("EZMQ_CONNECT_RETRY"), "{err}");
    }

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_duration("1.5s"), None);
    }
}
