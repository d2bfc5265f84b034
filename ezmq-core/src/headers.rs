//! Message headers: a small string map every message carries.

use std::collections::BTreeMap;
use std::fmt;

/// Prefix of the header names ezmq itself sets (attempt count, message id,
/// trace context). User headers should not start with it.
pub const RESERVED_HEADER_PREFIX: &str = "ezmq-";

/// Header carrying the attempt number on brokers that keep no delivery
/// count of their own (or when a retry re-publishes the message).
pub const ATTEMPT_HEADER: &str = "ezmq-attempt";

/// Header carrying a message id chosen by the producer
/// ([`PushOptions::with_message_id`](crate::PushOptions::with_message_id))
/// on brokers that assign their own ids.
pub const MESSAGE_ID_HEADER: &str = "ezmq-message-id";

/// The headers of a message: string keys to string values, sorted by key.
///
/// They travel with the message on every backend: as AMQP headers on
/// RabbitMQ, as stream fields on Redis, in a small envelope before the
/// body on Disque (only when there are headers: a message without headers
/// is stored as its bare body).
///
/// ```
/// use ezmq_core::Headers;
///
/// let mut h = Headers::new();
/// h.insert("tenant", "acme");
/// assert_eq!(h.get("tenant"), Some("acme"));
/// assert_eq!(h.len(), 1);
/// ```
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Headers(BTreeMap<String, String>);

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Sets `name` to `value`, returning the previous value.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) -> Option<String> {
        self.0.insert(name.into(), value.into())
    }

    /// Removes `name`, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        self.0.remove(name)
    }

    /// True when there is no header.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of headers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The headers, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The attempt number recorded in [`ATTEMPT_HEADER`], if any.
    pub fn attempt(&self) -> Option<u32> {
        self.get(ATTEMPT_HEADER).and_then(|v| v.parse().ok())
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.iter()).finish()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Headers(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl<'a> IntoIterator for &'a Headers {
    type Item = (&'a String, &'a String);
    type IntoIter = std::collections::btree_map::Iter<'a, String, String>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
