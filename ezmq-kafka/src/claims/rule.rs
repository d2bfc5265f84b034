//! The rule every reader applies to the claim log, record by record in
//! offset order, at each record's append time (the broker's clock, read
//! from the record): the same records give every reader the same state
//! and the same outcome for each record, so exactly one record wins a
//! free key.

use std::collections::HashMap;

/// A record's operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Take the key under `token` for `hold_ms`, unless it is held.
    Claim { token: String, hold_ms: u64 },
    /// Give the key back if `token` holds it.
    Release { token: String },
}

/// What a record did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Applied {
    /// The claim won the key.
    Won,
    /// The key was held under this token (the claimant's own, too).
    Held(String),
    /// The release gave the key back (`true`), or the token did not hold
    /// it (`false`).
    Released(bool),
}

#[derive(Debug)]
struct Entry {
    token: String,
    expires_ms: u64,
}

/// The claims as of the records applied so far.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    entries: HashMap<String, Entry>,
    /// Records applied since expired entries were last dropped.
    since_prune: usize,
}

/// Expired entries are dropped every this many records (they change no
/// outcome: an expired key is free).
const PRUNE_EVERY: usize = 4096;

impl Claims {
    /// Applies `op` on `key` written at `at_ms`; what it did.
    pub(crate) fn apply(&mut self, key: &str, op: &Op, at_ms: u64) -> Applied {
        self.since_prune += 1;
        if self.since_prune >= PRUNE_EVERY {
            self.since_prune = 0;
            self.entries.retain(|_, entry| entry.expires_ms > at_ms);
        }
        let live = self
            .entries
            .get(key)
            .filter(|entry| entry.expires_ms > at_ms);
        match op {
            Op::Claim { token, hold_ms } => match live {
                Some(entry) => Applied::Held(entry.token.clone()),
                None => {
                    self.entries.insert(
                        key.to_owned(),
                        Entry {
                            token: token.clone(),
                            expires_ms: at_ms.saturating_add(*hold_ms),
                        },
                    );
                    Applied::Won
                }
            },
            Op::Release { token } => {
                let ours = live.is_some_and(|entry| entry.token == *token);
                if ours {
                    self.entries.remove(key);
                }
                Applied::Released(ours)
            }
        }
    }

    /// The token holding `key` at `now_ms`.
    pub(crate) fn holder(&self, key: &str, now_ms: u64) -> Option<&str> {
        self.entries
            .get(key)
            .filter(|entry| entry.expires_ms > now_ms)
            .map(|entry| entry.token.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(token: &str, hold_ms: u64) -> Op {
        Op::Claim {
            token: token.into(),
            hold_ms,
        }
    }

    fn release(token: &str) -> Op {
        Op::Release {
            token: token.into(),
        }
    }

    #[test]
    fn the_first_claim_of_a_free_key_wins_until_its_hold_ends() {
        let mut claims = Claims::default();
        assert_eq!(claims.apply("k", &claim("a", 100), 1000), Applied::Won);
        assert_eq!(
            claims.apply("k", &claim("b", 100), 1050),
            Applied::Held("a".into())
        );
        assert_eq!(
            claims.apply("k", &claim("a", 100), 1060),
            Applied::Held("a".into())
        );
        assert_eq!(claims.holder("k", 1099), Some("a"));
        assert_eq!(claims.holder("k", 1100), None);
        assert_eq!(claims.apply("k", &claim("b", 100), 1100), Applied::Won);
    }

    #[test]
    fn only_the_holder_releases() {
        let mut claims = Claims::default();
        assert_eq!(claims.apply("k", &claim("a", 100), 0), Applied::Won);
        assert_eq!(
            claims.apply("k", &release("b"), 10),
            Applied::Released(false)
        );
        assert_eq!(
            claims.apply("k", &release("a"), 20),
            Applied::Released(true)
        );
        assert_eq!(claims.holder("k", 20), None);
        assert_eq!(claims.apply("k", &claim("b", 100), 30), Applied::Won);
        // An expired hold is nobody's to release.
        assert_eq!(
            claims.apply("k", &release("b"), 500),
            Applied::Released(false)
        );
    }
}
