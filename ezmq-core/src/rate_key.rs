//! Per-key rate limits
//! ([`ConsumeOptions::with_rate_limit_by`](crate::ConsumeOptions::with_rate_limit_by)):
//! which key a job counts against, and the limit each key gets.

use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::job::Job;
use crate::rate_limit::RateLimit;

/// Where a job's rate-limit key comes from: today a header the producer
/// sets (a tenant, a customer, an API account). A job without the header
/// is not limited by key.
///
/// ```
/// use ezmq_core::RateKey;
///
/// let key = RateKey::header("tenant");
/// assert_eq!(key.to_string(), "header tenant");
/// assert!(RateKey::header("").validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RateKey {
    header: String,
}

/// The longest header name a key may come from.
const MAX_HEADER_LEN: usize = 64;

impl RateKey {
    /// The key is the value of header `name`
    /// ([`PushOptions::with_header`](crate::PushOptions::with_header)).
    pub fn header(name: impl Into<String>) -> Self {
        RateKey {
            header: name.into(),
        }
    }

    /// The header the key is read from.
    pub fn header_name(&self) -> &str {
        &self.header
    }

    /// `job`'s key; `None` when it has none (it is then not limited by key).
    pub(crate) fn of<'a>(&self, job: &'a Job) -> Option<&'a str> {
        job.headers().get(&self.header)
    }

    /// Checks the header name: 1 to 64 ASCII letters, digits, `-`, `_`
    /// or `.`, and not one of ezmq's own (`ezmq-…`).
    pub fn validate(&self) -> Result<()> {
        let name = &self.header;
        let valid = !name.is_empty()
            && name.len() <= MAX_HEADER_LEN
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !valid {
            return Err(Error::invalid_option(
                "rate_limit_by",
                format!("the key header {name:?} must be 1 to {MAX_HEADER_LEN} ASCII letters, digits, '-', '_' or '.'"),
            ));
        }
        if name.to_ascii_lowercase().starts_with("ezmq-") {
            return Err(Error::invalid_option(
                "rate_limit_by",
                format!("the key header {name:?} is one of ezmq's own"),
            ));
        }
        Ok(())
    }
}

impl fmt::Display for RateKey {
    /// `header tenant`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "header {}", self.header)
    }
}

/// A rate limit each key has on its own: at most `limit` handler starts
/// of the topic per key, summed over every listener in every process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct KeyedRateLimit {
    /// Where a job's key comes from.
    pub key: RateKey,
    /// Each key's limit.
    pub limit: RateLimit,
}

/// The highest rate one key may have, per second: per-key limits are for
/// tenants and accounts; a topic-wide limit is
/// [`ConsumeOptions::with_rate_limit`](crate::ConsumeOptions::with_rate_limit).
const MAX_KEY_PER_SECOND: u128 = 1_000;

impl KeyedRateLimit {
    /// `limit` for each key `key` gives.
    pub fn new(key: RateKey, limit: RateLimit) -> Self {
        KeyedRateLimit { key, limit }
    }

    /// Checks the key and the limit (at most 1,000 starts a second per
    /// key).
    pub fn validate(&self) -> Result<()> {
        self.key.validate()?;
        self.limit.validate().map_err(|err| match err {
            Error::InvalidOption { reason, .. } => Error::invalid_option("rate_limit_by", reason),
            other => other,
        })?;
        if u128::from(self.limit.n()) * 1000 > MAX_KEY_PER_SECOND * self.limit.per().as_millis() {
            return Err(Error::invalid_option(
                "rate_limit_by",
                format!(
                    "{} per key is above {MAX_KEY_PER_SECOND} per second; limit the topic as a whole with with_rate_limit",
                    self.limit
                ),
            ));
        }
        Ok(())
    }

    /// How far ahead a job's start is reserved: ten periods, from 10 s to
    /// an hour. A job whose key has no start free that soon waits past it
    /// without a reservation, and reserves when it comes back.
    pub(crate) fn horizon(&self) -> Duration {
        self.limit
            .per()
            .saturating_mul(10)
            .clamp(Duration::from_secs(10), Duration::from_secs(3600))
    }
}

impl fmt::Display for KeyedRateLimit {
    /// `10/1s per tenant`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} per {}", self.limit, self.key.header)
    }
}

/// The bucket name of one key: its FNV-1a hash in hex, so any key (any
/// bytes, any length) makes a short, valid name.
pub(crate) fn key_hash(key: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn keys_and_limits_are_checked() {
        let tenant = RateKey::header("tenant");
        assert!(
            KeyedRateLimit::new(tenant.clone(), RateLimit::new(10, SECOND))
                .validate()
                .is_ok()
        );
        for bad in [
            KeyedRateLimit::new(tenant.clone(), RateLimit::new(2_000, SECOND)),
            KeyedRateLimit::new(tenant.clone(), RateLimit::new(0, SECOND)),
            KeyedRateLimit::new(RateKey::header("ezmq-priority"), RateLimit::new(1, SECOND)),
            KeyedRateLimit::new(RateKey::header("a b"), RateLimit::new(1, SECOND)),
        ] {
            assert!(
                matches!(bad.validate(), Err(Error::InvalidOption { .. })),
                "{bad} validated"
            );
        }
    }

    #[test]
    fn the_horizon_is_ten_periods_within_bounds() {
        let tenant = RateKey::header("tenant");
        let of = |per| KeyedRateLimit::new(tenant.clone(), RateLimit::new(1, per)).horizon();
        assert_eq!(of(SECOND), Duration::from_secs(10));
        assert_eq!(of(Duration::from_secs(30)), Duration::from_secs(300));
        assert_eq!(
            of(Duration::from_secs(24 * 3600)),
            Duration::from_secs(3600)
        );
    }

    #[test]
    fn key_hashes_are_short_and_stable() {
        assert_eq!(key_hash("acme"), key_hash("acme"));
        assert_ne!(key_hash("acme"), key_hash("acme2"));
        assert_eq!(key_hash("x".repeat(500).as_str()).len(), 16);
    }
}
