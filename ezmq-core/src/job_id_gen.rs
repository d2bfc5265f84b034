//! New job ids: UUIDv7 ([RFC 9562 §5.7]) from a generator per thread.
//!
//! An id is 48 bits of Unix milliseconds, the version, a 12-bit counter
//! (the RFC's "fixed bit-length dedicated counter", method 1), the variant
//! and 62 random bits. Per thread the generator keeps the last
//! millisecond and its counter:
//!
//! - a new millisecond starts the counter at a random value below 2048,
//!   leaving room for at least 2048 more ids in that millisecond;
//! - the same millisecond (or a clock that went back) takes the next
//!   counter value;
//! - a counter past 4095 moves the id's millisecond on by one, ahead of
//!   the clock until the clock catches up.
//!
//! So one thread's ids strictly increase, and ids of different threads and
//! processes sort by millisecond. The random bits come from a `wyrand`
//! state seeded once per thread from the operating system (through
//! `uuid`'s v4): ids must be unique, not secret — a job id names a job, it
//! grants nothing. This is the cost of every push, so it takes the
//! clock's reading from its caller (a batch reads it once) and allocates
//! nothing.
//!
//! [RFC 9562 §5.7]: https://www.rfc-editor.org/rfc/rfc9562#section-5.7

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Largest counter value (12 bits).
const COUNTER_MAX: u16 = 0x0fff;
/// A new millisecond's counter starts below this.
const COUNTER_START_BELOW: u16 = 0x0800;

/// One thread's generator.
struct Generator {
    last_ms: Cell<u64>,
    counter: Cell<u16>,
    rng: Cell<u64>,
}

thread_local! {
    static GENERATOR: Generator = Generator::seeded();
}

/// A new UUIDv7 for the time `now` (see the module docs).
pub(crate) fn next_v7(now: SystemTime) -> uuid::Uuid {
    let now_ms = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    GENERATOR.with(|g| g.next(now_ms))
}

impl Generator {
    fn seeded() -> Self {
        Generator {
            last_ms: Cell::new(0),
            counter: Cell::new(0),
            rng: Cell::new(uuid::Uuid::new_v4().as_u64_pair().0),
        }
    }

    /// wyrand: 64 random bits.
    fn random(&self) -> u64 {
        let state = self.rng.get().wrapping_add(0xa076_1d64_78bd_642f);
        self.rng.set(state);
        let t = u128::from(state) * u128::from(state ^ 0xe703_7ed1_a0b4_28db);
        ((t >> 64) as u64) ^ (t as u64)
    }

    fn next(&self, now_ms: u64) -> uuid::Uuid {
        let random = self.random();
        let fresh_counter = (random >> 48) as u16 % COUNTER_START_BELOW;
        let last = self.last_ms.get();
        let (ms, counter) = if now_ms > last {
            (now_ms, fresh_counter)
        } else {
            match self.counter.get().checked_add(1) {
                Some(next) if next <= COUNTER_MAX => (last, next),
                _ => (last.saturating_add(1), fresh_counter),
            }
        };
        self.last_ms.set(ms);
        self.counter.set(counter);
        let mut bytes = [0u8; 10];
        bytes[..2].copy_from_slice(&counter.to_be_bytes());
        let tail = self.random();
        bytes[2..].copy_from_slice(&tail.to_be_bytes());
        uuid::Builder::from_unix_timestamp_millis(ms, &bytes).into_uuid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_v7_and_carry_the_time() {
        let before = SystemTime::now();
        let id = next_v7(SystemTime::now());
        assert_eq!(id.get_version_num(), 7);
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        let (secs, nanos) = id.get_timestamp().unwrap().to_unix();
        let at = UNIX_EPOCH + std::time::Duration::new(secs, nanos);
        let skew = at.duration_since(before).unwrap_or_else(|e| e.duration());
        assert!(skew < std::time::Duration::from_secs(1), "{skew:?}");
    }

    #[test]
    fn one_threads_ids_strictly_increase_within_a_millisecond_and_past_the_counter() {
        let g = Generator::seeded();
        let mut last = g.next(1_000);
        // Far more ids than one millisecond's counter holds, the clock
        // standing still, then going back.
        for i in 0..10_000 {
            let now = if i < 9_000 { 1_000 } else { 900 };
            let id = g.next(now);
            assert!(id > last, "id {i}: {id} after {last}");
            last = id;
        }
        // The clock passing the ids' millisecond takes over again.
        let later = g.next(1_000_000);
        assert!(later > last);
        let (secs, _) = later.get_timestamp().unwrap().to_unix();
        assert_eq!(secs, 1_000);
    }

    #[test]
    fn threads_do_not_collide() {
        let ids: Vec<uuid::Uuid> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        (0..5_000)
                            .map(|_| next_v7(SystemTime::now()))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
    }
}
