//! Flow control that core builds from the SPI for backends without a
//! primitive of their own: the cluster-wide rate limiter ([`claim_rate`]),
//! concurrency slots ([`claim_slots`]) and per-key starts
//! ([`claim_keys`]), all kept in
//! [`ExclusiveClaim`](crate::spi::ExclusiveClaim)s.

use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) mod claim_keys;
pub(crate) mod claim_rate;
pub(crate) mod claim_slots;

/// Milliseconds since the Unix epoch (0 for a clock before it): both
/// limiters number their slices and epochs by wall-clock time.
pub(crate) fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}
