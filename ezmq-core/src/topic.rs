//! Validated topic (queue) names.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};

/// The longest topic name accepted, in bytes.
pub const MAX_TOPIC_LEN: usize = 200;

/// The prefix reserved for queues that ezmq itself creates (dead letters of
/// internal queues, broadcast groups, cron claims, reply queues).
pub const INTERNAL_PREFIX: &str = "__ezmq";

/// The separator ezmq uses inside internal queue names. User topics cannot
/// contain it, so an internal name can never collide with a user topic.
pub const INTERNAL_SEPARATOR: char = '|';

/// A validated topic name.
///
/// User topics are 1 to [`MAX_TOPIC_LEN`] bytes of ASCII letters, digits and
/// `- _ . : /`, and must not start with [`INTERNAL_PREFIX`].
///
/// ```
/// use ezmq_core::Topic;
///
/// let t = Topic::new("orders.created").unwrap();
/// assert_eq!(t.as_str(), "orders.created");
/// assert!(Topic::new("").is_err());
/// assert!(Topic::new("has space").is_err());
/// assert!(Topic::new("__ezmq|x").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Topic(Arc<str>);

impl Topic {
    /// Validates a user topic name.
    pub fn new(name: impl AsRef<str>) -> Result<Self> {
        let name = name.as_ref();
        if let Some(reason) = invalid_reason(name) {
            return Err(Error::InvalidTopic {
                topic: name.to_owned(),
                reason,
            });
        }
        if name.starts_with(INTERNAL_PREFIX) {
            return Err(Error::InvalidTopic {
                topic: name.to_owned(),
                reason: "names starting with `__ezmq` are reserved for ezmq",
            });
        }
        // One allocation: the shared name itself.
        Ok(Topic(Arc::from(name)))
    }

    /// Builds an internal queue name `__ezmq|kind|part|part...`. Each part
    /// must itself be a valid user name (checked), so distinct part lists
    /// always give distinct names.
    pub fn internal(kind: &str, parts: &[&str]) -> Result<Self> {
        let mut name = String::from(INTERNAL_PREFIX);
        for part in std::iter::once(kind).chain(parts.iter().copied()) {
            if let Some(reason) = invalid_reason(part) {
                return Err(Error::InvalidTopic {
                    topic: part.to_owned(),
                    reason,
                });
            }
            name.push(INTERNAL_SEPARATOR);
            name.push_str(part);
        }
        if name.len() > MAX_TOPIC_LEN + INTERNAL_PREFIX.len() + 64 {
            return Err(Error::InvalidTopic {
                topic: name,
                reason: "internal name too long",
            });
        }
        Ok(Topic(Arc::from(name)))
    }

    /// Wraps a name read back from the broker without validating it (for
    /// example a queue name in a fetched job).
    pub fn from_broker(name: String) -> Self {
        Topic(Arc::from(name))
    }

    /// True for names built by [`Topic::internal`].
    pub fn is_internal(&self) -> bool {
        self.0.starts_with(INTERNAL_PREFIX)
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn invalid_reason(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("must not be empty");
    }
    if name.len() > MAX_TOPIC_LEN {
        return Some("longer than 200 bytes");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.:/".contains(&b))
    {
        return Some("only ASCII letters, digits and `- _ . : /` are allowed");
    }
    None
}

impl fmt::Display for Topic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Topic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl AsRef<str> for Topic {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for Topic {
    type Error = Error;
    fn try_from(s: &str) -> Result<Self> {
        Topic::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_usual_names() {
        for ok in ["a", "orders", "orders.created", "svc:jobs/v1", "A-b_c"] {
            assert!(Topic::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_bad_names_with_reason() {
        let err = Topic::new("a|b").unwrap_err().to_string();
        assert!(err.contains("\"a|b\""), "{err}");
        assert!(Topic::new("x".repeat(201)).is_err());
        assert!(Topic::new("é").is_err());
        assert!(Topic::new("__ezmq.x").is_err());
    }

    #[test]
    fn internal_names_cannot_collide() {
        let a = Topic::internal("bc", &["a.b", "c"]).unwrap();
        let b = Topic::internal("bc", &["a", "b.c"]).unwrap();
        assert_ne!(a, b);
        assert!(a.is_internal());
        assert!(Topic::internal("bc", &["a|b"]).is_err());
        assert!(Topic::internal("bc", &[""]).is_err());
    }
}
