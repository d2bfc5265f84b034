//! Key names. Every key of one topic carries the topic as its hash tag
//! (`{topic}`), so the multi-key scripts run on one Redis Cluster slot.
//! Topic names cannot contain `{` or `}`, so the tag is always the whole
//! topic.

use ezmq_core::Topic;

/// The consumer group of a topic's queue stream.
pub(crate) const QUEUE_GROUP: &str = "ezmq";

/// The keys of one topic (queue) or broadcast topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TopicKeys {
    /// The stream.
    pub(crate) stream: String,
    /// The sorted set of delayed messages (score = due time in ms).
    pub(crate) delayed: String,
    /// Broadcast only: the hash of groups (`group -> deadline,retention`).
    pub(crate) groups: String,
}

impl TopicKeys {
    /// The keys of queue topic `topic`: `<prefix>:{<topic>}:s` and `:d`.
    pub(crate) fn queue(prefix: &str, topic: &Topic) -> Self {
        TopicKeys {
            stream: format!("{prefix}:{{{topic}}}:s"),
            delayed: format!("{prefix}:{{{topic}}}:d"),
            groups: String::new(),
        }
    }

    /// Only the stream key of queue topic `topic` (`<prefix>:{<topic>}:s`),
    /// built with one allocation: the push hot path needs nothing else.
    pub(crate) fn queue_stream(prefix: &str, topic: &Topic) -> String {
        let topic = topic.as_str();
        let mut key = String::with_capacity(prefix.len() + topic.len() + 5);
        key.push_str(prefix);
        key.push_str(":{");
        key.push_str(topic);
        key.push_str("}:s");
        key
    }

    /// The key remembering message id `id` of queue topic `topic` for the
    /// deduplication window: `<prefix>:{<topic>}:msgid:<id>`.
    pub(crate) fn message_id(prefix: &str, topic: &Topic, id: &str) -> String {
        format!("{prefix}:{{{topic}}}:msgid:{id}")
    }

    /// The keys of broadcast topic `topic`: `<prefix>:{<topic>}:b`, `:bd`
    /// and `:bg`.
    pub(crate) fn broadcast(prefix: &str, topic: &Topic) -> Self {
        TopicKeys {
            stream: format!("{prefix}:{{{topic}}}:b"),
            delayed: format!("{prefix}:{{{topic}}}:bd"),
            groups: format!("{prefix}:{{{topic}}}:bg"),
        }
    }
}

/// The key of exclusive claim `key`.
pub(crate) fn claim(prefix: &str, key: &Topic) -> String {
    format!("{prefix}:claim:{{{key}}}")
}

/// The prefix of every reply inbox key.
pub(crate) fn inbox_prefix(prefix: &str) -> String {
    format!("{prefix}:inbox:")
}

/// A new reply inbox key (its own hash tag).
pub(crate) fn new_inbox(prefix: &str) -> String {
    format!("{prefix}:inbox:{{{}}}", uuid::Uuid::new_v4().simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_keys_share_the_hash_tag() {
        let t = Topic::new("orders.created").unwrap();
        let q = TopicKeys::queue("ezmq", &t);
        assert_eq!(q.stream, "ezmq:{orders.created}:s");
        assert_eq!(q.delayed, "ezmq:{orders.created}:d");
        assert_eq!(
            TopicKeys::message_id("ezmq", &t, "o-1"),
            "ezmq:{orders.created}:msgid:o-1"
        );
        let b = TopicKeys::broadcast("ezmq", &t);
        assert_eq!(b.groups, "ezmq:{orders.created}:bg");
        assert!(new_inbox("ezmq").starts_with(&inbox_prefix("ezmq")));
    }
}
