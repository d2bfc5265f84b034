//! Message headers: a small string map every message carries.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

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
// Sorted entries, not a tree: a message carries a handful of headers, and
// every push writes one (its id), so the map's cost is the push's. One
// header is stored inline (a plain push allocates no list); names ezmq
// writes are `'static`, and the id's value shares the `JobId`'s text, so
// neither is copied.
#[derive(Clone, Default)]
pub struct Headers(Entries);

/// A header's name.
type Name = Cow<'static, str>;
/// One header.
type Entry = (Name, Value);

/// A header's value: its own text, or text shared with a job id.
#[derive(Clone)]
enum Value {
    Owned(String),
    Shared(Arc<str>),
}

impl Value {
    fn as_str(&self) -> &str {
        match self {
            Value::Owned(text) => text,
            Value::Shared(text) => text,
        }
    }

    fn into_string(self) -> String {
        match self {
            Value::Owned(text) => text,
            Value::Shared(text) => text.as_ref().to_owned(),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Value {}

/// The entries, sorted by name, names unique.
#[derive(Clone, Default)]
enum Entries {
    #[default]
    Empty,
    One([Entry; 1]),
    Many(Vec<Entry>),
}

impl Entries {
    fn as_slice(&self) -> &[Entry] {
        match self {
            Entries::Empty => &[],
            Entries::One(one) => one,
            Entries::Many(many) => many,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [Entry] {
        match self {
            Entries::Empty => &mut [],
            Entries::One(one) => one,
            Entries::Many(many) => many,
        }
    }

    /// Inserts `entry` at `i` (a position from a failed binary search).
    fn insert_at(&mut self, i: usize, entry: Entry) {
        *self = match std::mem::take(self) {
            Entries::Empty => Entries::One([entry]),
            Entries::One([first]) => {
                let mut many = Vec::with_capacity(4);
                many.push(first);
                many.insert(i.min(1), entry);
                Entries::Many(many)
            }
            Entries::Many(mut many) => {
                many.insert(i.min(many.len()), entry);
                Entries::Many(many)
            }
        };
    }

    /// Removes the entry at `i` (a position from a binary search).
    fn remove_at(&mut self, i: usize) -> Option<Entry> {
        let (rest, removed) = match std::mem::take(self) {
            Entries::Empty => (Entries::Empty, None),
            Entries::One([only]) if i == 0 => (Entries::Empty, Some(only)),
            one @ Entries::One(_) => (one, None),
            Entries::Many(mut many) if i < many.len() => {
                let removed = many.remove(i);
                (Entries::Many(many), Some(removed))
            }
            many @ Entries::Many(_) => (many, None),
        };
        *self = rest;
        removed
    }
}

impl PartialEq for Headers {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_slice() == other.0.as_slice()
    }
}

impl Eq for Headers {}

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Self::default()
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0
            .as_slice()
            .binary_search_by(|(k, _)| k.as_ref().cmp(name))
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        let i = self.position(name).ok()?;
        self.0.as_slice().get(i).map(|(_, v)| v.as_str())
    }

    /// Sets `name` to `value`, returning the previous value.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) -> Option<String> {
        self.set(Cow::Owned(name.into()), Value::Owned(value.into()))
    }

    /// [`insert`](Self::insert) of a name known at compile time (ezmq's
    /// own headers): no copy of the name.
    pub(crate) fn insert_static(&mut self, name: &'static str, value: String) -> Option<String> {
        self.set(Cow::Borrowed(name), Value::Owned(value))
    }

    /// [`insert_static`](Self::insert_static) of a value shared with its
    /// owner (a job id's text): no copy of the value either.
    pub(crate) fn insert_shared(&mut self, name: &'static str, value: Arc<str>) -> Option<String> {
        self.set(Cow::Borrowed(name), Value::Shared(value))
    }

    /// The value of `name` when it was set by
    /// [`insert_shared`](Self::insert_shared).
    pub(crate) fn get_shared(&self, name: &str) -> Option<&Arc<str>> {
        let i = self.position(name).ok()?;
        match self.0.as_slice().get(i) {
            Some((_, Value::Shared(text))) => Some(text),
            _ => None,
        }
    }

    fn set(&mut self, name: Name, value: Value) -> Option<String> {
        match self.position(&name) {
            Ok(i) => self
                .0
                .as_mut_slice()
                .get_mut(i)
                .map(|(_, v)| std::mem::replace(v, value).into_string()),
            Err(i) => {
                self.0.insert_at(i, (name, value));
                None
            }
        }
    }

    /// Removes `name`, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        let i = self.position(name).ok()?;
        self.0.remove_at(i).map(|(_, v)| v.into_string())
    }

    /// True when there is no header.
    pub fn is_empty(&self) -> bool {
        self.0.as_slice().is_empty()
    }

    /// Number of headers.
    pub fn len(&self) -> usize {
        self.0.as_slice().len()
    }

    /// The headers, sorted by name.
    pub fn iter(&self) -> HeadersIter<'_> {
        HeadersIter(self.0.as_slice().iter())
    }

    /// The attempt number recorded in [`ATTEMPT_HEADER`], if any.
    pub fn attempt(&self) -> Option<u32> {
        self.get(ATTEMPT_HEADER).and_then(|v| v.parse().ok())
    }
}

/// The headers of a [`Headers`] as `(name, value)`, sorted by name.
#[derive(Clone)]
pub struct HeadersIter<'a>(std::slice::Iter<'a, Entry>);

impl fmt::Debug for HeadersIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.clone()).finish()
    }
}

impl<'a> Iterator for HeadersIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k.as_ref(), v.as_str()))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for HeadersIter<'_> {}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut headers = Headers::new();
        for (k, v) in iter {
            headers.insert(k, v);
        }
        headers
    }
}

impl<'a> IntoIterator for &'a Headers {
    type Item = (&'a str, &'a str);
    type IntoIter = HeadersIter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

// A JSON object (a map), as the `BTreeMap` it was.
impl serde::Serialize for Headers {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for Headers {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Headers;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of header names to string values")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Headers, A::Error> {
                let mut headers = Headers::new();
                while let Some((k, v)) = map.next_entry::<String, String>()? {
                    headers.insert(k, v);
                }
                Ok(headers)
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_sorted_and_unique() {
        let mut h = Headers::new();
        h.insert("b", "2");
        h.insert_static("ezmq-message-id", "id".to_owned());
        h.insert("a", "1");
        assert_eq!(h.insert("b", "3").as_deref(), Some("2"));
        let names: Vec<&str> = h.iter().map(|(k, _)| k).collect();
        assert_eq!(names, ["a", "b", "ezmq-message-id"]);
        assert_eq!(h.get("b"), Some("3"));
        assert_eq!(h.remove("a").as_deref(), Some("1"));
        assert_eq!(h.get("a"), None);
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn equal_whatever_the_insertion_order_or_name_kind() {
        let mut one = Headers::new();
        one.insert_static("ezmq-attempt", "2".to_owned());
        one.insert("x", "y");
        let two: Headers = [("x", "y"), ("ezmq-attempt", "2")].into_iter().collect();
        assert_eq!(one, two);
    }

    #[test]
    fn one_header_inline_then_many_then_back() {
        let mut h = Headers::new();
        let id: Arc<str> = Arc::from("0193");
        h.insert_shared("ezmq-message-id", Arc::clone(&id));
        assert_eq!(h.get("ezmq-message-id"), Some("0193"));
        assert!(Arc::ptr_eq(h.get_shared("ezmq-message-id").unwrap(), &id));
        h.insert("a", "1");
        h.insert("z", "2");
        assert_eq!(h.len(), 3);
        assert_eq!(h.remove("a").as_deref(), Some("1"));
        assert_eq!(h.remove("z").as_deref(), Some("2"));
        let mut one = Headers::new();
        one.insert("ezmq-message-id", "0193");
        assert_eq!(h, one, "one header left equals one header inserted");
        assert!(one.get_shared("ezmq-message-id").is_none());
        assert_eq!(h.remove("ezmq-message-id").as_deref(), Some("0193"));
        assert_eq!(h.remove("ezmq-message-id"), None);
        assert!(h.is_empty());
        assert_eq!(h, Headers::new());
    }

    #[test]
    fn json_is_an_object() {
        let h: Headers = [("tenant", "acme"), ("a", "1")].into_iter().collect();
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(json, r#"{"a":"1","tenant":"acme"}"#);
        let back: Headers = serde_json::from_str(r#"{"tenant":"acme","a":"1","a":"2"}"#).unwrap();
        assert_eq!(back.get("a"), Some("2"));
        assert_eq!(back.len(), 2);
        assert!(serde_json::from_str::<Headers>(r#"{"a":1}"#).is_err());
    }
}
