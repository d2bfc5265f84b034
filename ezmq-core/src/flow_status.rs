//! What tools see of a topic's flow control
//! ([`Admin::flow`](crate::Admin::flow)): the limits its listeners
//! enforce, and whether they are holding jobs back.

use std::fmt;
use std::time::Duration;

use crate::consume_options::ConsumeOptions;
use crate::rate_key::{KeyedRateLimit, RateKey};
use crate::rate_limit::RateLimit;

/// The cluster-wide limits a topic's listeners run with, as they publish
/// them (every few seconds, in a claim of the topic that any process can
/// read).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowLimits {
    /// [`ConsumeOptions::rate_limit`].
    pub rate_limit: Option<RateLimit>,
    /// [`ConsumeOptions::rate_limit_by`].
    pub rate_limit_by: Option<KeyedRateLimit>,
    /// [`ConsumeOptions::global_concurrency`].
    pub global_concurrency: Option<u32>,
    /// [`ConsumeOptions::slot_lease`], with a global concurrency limit.
    pub slot_lease: Option<Duration>,
}

/// A topic's flow control as the broker knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowStatus {
    /// The limits a running listener of the topic published; `None` when
    /// no listener with limits ran in the last half minute.
    pub limits: Option<FlowLimits>,
    /// True when a listener of the topic waited for a token or a slot, or
    /// deferred a job over its key's limit, in the last 5 s: jobs are
    /// waiting because of the limits, not for want of listeners.
    pub held_back: bool,
}

impl FlowLimits {
    /// The limits of a listener's options; `None` without any.
    pub(crate) fn of(options: &ConsumeOptions) -> Option<Self> {
        if options.rate_limit.is_none()
            && options.rate_limit_by.is_none()
            && options.global_concurrency.is_none()
        {
            return None;
        }
        Some(FlowLimits {
            rate_limit: options.rate_limit,
            rate_limit_by: options.rate_limit_by.clone(),
            global_concurrency: options.global_concurrency,
            slot_lease: options.global_concurrency.map(|_| options.slot_lease),
        })
    }

    /// The record's text:
    /// `v1;r=<n>/<per_ms>/<burst>;k=<n>/<per_ms>/<burst>/<header>;c=<n>/<lease_ms>`,
    /// each part only when set.
    pub(crate) fn to_token(&self) -> String {
        let mut token = String::from("v1");
        if let Some(rate) = self.rate_limit {
            token.push_str(&format!(
                ";r={}/{}/{}",
                rate.n(),
                rate.per_millis(),
                rate.burst()
            ));
        }
        if let Some(keyed) = &self.rate_limit_by {
            let rate = keyed.limit;
            token.push_str(&format!(
                ";k={}/{}/{}/{}",
                rate.n(),
                rate.per_millis(),
                rate.burst(),
                keyed.key.header_name()
            ));
        }
        if let (Some(n), Some(lease)) = (self.global_concurrency, self.slot_lease) {
            token.push_str(&format!(";c={n}/{}", lease.as_millis()));
        }
        token
    }

    /// The limits of a record's text; `None` for a text this version
    /// cannot read.
    pub(crate) fn from_token(token: &str) -> Option<Self> {
        let mut parts = token.split(';');
        if parts.next() != Some("v1") {
            return None;
        }
        let mut limits = FlowLimits {
            rate_limit: None,
            rate_limit_by: None,
            global_concurrency: None,
            slot_lease: None,
        };
        for part in parts {
            let (kind, value) = part.split_once('=')?;
            if kind == "k" {
                // The header name last: the numbers before it.
                let (numbers, header) = value.rsplit_once('/')?;
                let limit = rate_of(numbers)?;
                let key = RateKey::header(header);
                key.validate().ok()?;
                limits.rate_limit_by = Some(KeyedRateLimit::new(key, limit));
                continue;
            }
            let numbers: Vec<u64> = value
                .split('/')
                .map(str::parse)
                .collect::<std::result::Result<_, _>>()
                .ok()?;
            match (kind, numbers.as_slice()) {
                ("r", [_, _, _]) => limits.rate_limit = Some(rate_of(value)?),
                ("c", [n, lease]) => {
                    limits.global_concurrency = Some(u32::try_from(*n).ok()?);
                    limits.slot_lease = Some(Duration::from_millis(*lease));
                }
                _ => return None,
            }
        }
        Some(limits)
    }
}

/// A rate limit of its record text `<n>/<per_ms>/<burst>`.
fn rate_of(text: &str) -> Option<RateLimit> {
    let mut numbers = text.split('/').map(str::parse::<u64>);
    let (Some(Ok(n)), Some(Ok(per)), Some(Ok(burst)), None) = (
        numbers.next(),
        numbers.next(),
        numbers.next(),
        numbers.next(),
    ) else {
        return None;
    };
    Some(
        RateLimit::new(u32::try_from(n).ok()?, Duration::from_millis(per))
            .with_burst(u32::try_from(burst).ok()?),
    )
}

impl fmt::Display for FlowLimits {
    /// `50/1s burst 5, 5 at once`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(rate) = self.rate_limit {
            // RateLimit's own form, with the burst always shown.
            parts.push(rate.with_burst(rate.burst()).to_string());
        }
        if let Some(keyed) = &self.rate_limit_by {
            let rate = keyed.limit.with_burst(keyed.limit.burst());
            parts.push(format!("{rate} per {}", keyed.key.header_name()));
        }
        if let Some(n) = self.global_concurrency {
            parts.push(format!("{n} at once"));
        }
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written() {
        let options = ConsumeOptions::new()
            .with_rate_limit(50, Duration::from_secs(1))
            .with_global_concurrency(5);
        let limits = FlowLimits::of(&options).expect("limits");
        let token = limits.to_token();
        assert_eq!(token, "v1;r=50/1000/5;c=5/4000");
        let read = FlowLimits::from_token(&token).expect("readable");
        assert_eq!(read.global_concurrency, Some(5));
        assert_eq!(read.slot_lease, Some(Duration::from_secs(4)));
        let rate = read.rate_limit.expect("rate");
        assert_eq!(
            (rate.n(), rate.per(), rate.burst()),
            (50, Duration::from_secs(1), 5)
        );
        assert_eq!(read.to_string(), "50/1s burst 5, 5 at once");
        assert!(FlowLimits::of(&ConsumeOptions::new()).is_none());
        let keyed = ConsumeOptions::new().with_rate_limit_by(
            RateKey::header("tenant"),
            10,
            Duration::from_secs(1),
        );
        let limits = FlowLimits::of(&keyed).expect("limits");
        assert_eq!(limits.to_token(), "v1;k=10/1000/1/tenant");
        let read = FlowLimits::from_token(&limits.to_token()).expect("readable");
        assert_eq!(read.to_string(), "10/1s burst 1 per tenant");
        assert_eq!(
            read.rate_limit_by,
            limits
                .rate_limit_by
                .map(|k| KeyedRateLimit::new(k.key, k.limit.with_burst(1)))
        );
        assert!(FlowLimits::from_token("v2;x=1").is_none());
        assert!(FlowLimits::from_token("v1;r=5/x/1").is_none());
    }
}
