//! Unique jobs: a push with a unique key stores nothing while another job
//! with that key is scheduled, waiting or running.
//!
//! The key is an [exclusive claim](crate::spi::ExclusiveClaim) of the
//! internal name `__ezmq|unique|<topic>|<key>`, held under the job's id
//! for the key's ttl. The producer pipeline claims it after stamping the
//! job and before the broker sees the job: the one push that wins the
//! claim is stored; every other gets [`Error::Duplicate`] with the
//! winner's id. The claim is exactly-one-winner on every backend, so this
//! holds for concurrent pushers in any number of processes.
//!
//! The job carries its key in the `ezmq-unique-key` header. When a
//! listener acknowledges it — it succeeded, was dead-lettered, or was
//! dropped — the key is given back (unless it was pushed with
//! [`UniqueKey::until_ttl`]); a push whose broker refused it gives the key
//! back at once. A push whose outcome is unknown
//! ([`Error::OutcomeUnknown`]) keeps it, since the job may be stored. A
//! producer that dies between the claim and the push leaves the key held
//! with no job until the ttl ends.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::headers::Headers;
use crate::job::{Job, JobId};
use crate::spi::{Backend, ClaimOutcome, MAX_CLAIM_HOLD};
use crate::topic::Topic;

/// Header with a unique job's key.
pub const UNIQUE_KEY_HEADER: &str = "ezmq-unique-key";
/// Header present (value `ttl`) when a unique job's key is kept until its
/// ttl ends instead of being given back when the job is settled.
pub const UNIQUE_RELEASE_HEADER: &str = "ezmq-unique-release";

/// The longest unique key, in bytes.
pub const MAX_UNIQUE_KEY_LEN: usize = 100;

/// A push's unique key ([`PushOptions::with_unique_key`](crate::PushOptions::with_unique_key)).
///
/// ```
/// use std::time::Duration;
/// use ezmq_core::UniqueKey;
///
/// let key = UniqueKey::new("reminder:user-42", Duration::from_secs(3 * 86_400)).until_ttl();
/// assert_eq!(key.key(), "reminder:user-42");
/// assert!(key.is_kept_until_ttl());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UniqueKey {
    key: String,
    ttl: Duration,
    until_ttl: bool,
}

impl UniqueKey {
    /// Key `key` (1 to [`MAX_UNIQUE_KEY_LEN`] bytes, any text), held for at
    /// most `ttl` (1 s to 30 days), given back when the job is settled.
    pub fn new(key: impl Into<String>, ttl: Duration) -> Self {
        UniqueKey {
            key: key.into(),
            ttl,
            until_ttl: false,
        }
    }

    /// Keeps the key until its ttl ends, also after the job was settled:
    /// "at most one such job per ttl" (a debounce) rather than "at most
    /// one at a time".
    #[must_use]
    pub fn until_ttl(mut self) -> Self {
        self.until_ttl = true;
        self
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The longest the key is held.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// True when the key is kept until the ttl ends.
    pub fn is_kept_until_ttl(&self) -> bool {
        self.until_ttl
    }

    /// Checks the key and ttl.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.key.is_empty() || self.key.len() > MAX_UNIQUE_KEY_LEN {
            return Err(Error::invalid_option(
                "unique_key",
                format!("must be 1 to {MAX_UNIQUE_KEY_LEN} bytes long"),
            ));
        }
        if self.ttl < Duration::from_secs(1) || self.ttl > MAX_CLAIM_HOLD {
            return Err(Error::invalid_option(
                "unique_key",
                format!("the ttl {:?} must be 1s to 30 days", self.ttl),
            ));
        }
        Ok(())
    }

    /// Writes the key into a job's headers.
    pub(crate) fn stamp(&self, headers: &mut Headers) {
        headers.insert_static(UNIQUE_KEY_HEADER, self.key.as_str().to_owned());
        if self.until_ttl {
            headers.insert_static(UNIQUE_RELEASE_HEADER, "ttl".to_owned());
        }
    }
}

/// The claim name of unique key `key` of `topic`: the key's bytes that
/// are not letters, digits, `-`, `_`, `:` or `/` written as `.XX`.
pub(crate) fn claim_name(topic: &Topic, key: &str) -> Result<Topic> {
    let mut encoded = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b':' | b'/') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!(".{byte:02X}"));
        }
    }
    Topic::internal("unique", &[topic.as_str(), &encoded]).map_err(|_| {
        Error::invalid_option(
            "unique_key",
            format!("topic {topic} with key {key:?} makes too long a name"),
        )
    })
}

/// A unique key this push holds: given back if the broker refuses the job.
#[derive(Debug)]
pub(crate) struct HeldKey {
    name: Topic,
    id: JobId,
}

/// Claims `unique` for job `id` of `topic`: the held key, or
/// [`Error::Duplicate`] with the id of the job holding it.
pub(crate) async fn claim(
    backend: &dyn Backend,
    topic: &Topic,
    unique: &UniqueKey,
    id: &JobId,
) -> Result<HeldKey> {
    let name = claim_name(topic, &unique.key)?;
    let claims = backend.exclusive_claim().ok_or(Error::Unsupported {
        backend: backend.name(),
        capability: crate::spi::Capability::ExclusiveClaim,
    })?;
    match claims.claim(&name, id.as_str(), unique.ttl).await? {
        ClaimOutcome::Won => Ok(HeldKey {
            name,
            id: id.clone(),
        }),
        ClaimOutcome::Held(holder) => Err(duplicate(topic, unique, holder.map(JobId::new))),
    }
}

/// The refusal of a push whose `unique` key job `existing` holds.
pub(crate) fn duplicate(topic: &Topic, unique: &UniqueKey, existing: Option<JobId>) -> Error {
    Error::Duplicate {
        topic: topic.as_str().to_owned(),
        key: unique.key.clone(),
        existing,
    }
}

impl HeldKey {
    /// Gives the key back after the broker refused the job.
    pub(crate) async fn give_back(self, backend: &dyn Backend) {
        release(backend, &self.name, &self.id).await;
    }
}

/// The claim to give back once `job` is settled: its unique key's, unless
/// it has none or keeps it until the ttl.
pub(crate) fn settled_key(job: &Job) -> Option<Topic> {
    let headers = job.headers();
    let key = headers.get(UNIQUE_KEY_HEADER)?;
    if headers.get(UNIQUE_RELEASE_HEADER).is_some() {
        return None;
    }
    claim_name(job.topic(), key).ok()
}

/// Gives unique key claim `name` back when job `id` holds it; a failure is
/// logged (the key is then free when its ttl ends).
pub(crate) async fn release(backend: &dyn Backend, name: &Topic, id: &JobId) {
    let Some(claims) = backend.exclusive_claim() else {
        return;
    };
    if let Err(err) = claims.release(name, id.as_str()).await {
        tracing::warn!(
            key = %name,
            message_id = %id,
            cause = %err,
            "could not give a unique key back; it is free when its ttl ends"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_names_are_distinct_and_valid() {
        let t = Topic::new("mail").unwrap();
        let a = claim_name(&t, "user 42").unwrap();
        let b = claim_name(&t, "user.2042").unwrap();
        let c = claim_name(&t, "user:42/é").unwrap();
        assert_eq!(a.as_str(), "__ezmq|unique|mail|user.2042");
        assert_ne!(a, b, "a space and a literal `.20` differ");
        assert_eq!(b.as_str(), "__ezmq|unique|mail|user.2E2042");
        assert!(c.as_str().ends_with("user:42/.C3.A9"));
        assert!(claim_name(&t, &"x".repeat(100)).is_ok());
    }

    #[test]
    fn keys_and_ttls_are_checked() {
        let day = Duration::from_secs(86_400);
        assert!(UniqueKey::new("k", day).validate().is_ok());
        assert!(UniqueKey::new("", day).validate().is_err());
        assert!(UniqueKey::new("k".repeat(101), day).validate().is_err());
        assert!(UniqueKey::new("k", Duration::from_millis(10))
            .validate()
            .is_err());
        assert!(UniqueKey::new("k", day * 31).validate().is_err());
    }
}
