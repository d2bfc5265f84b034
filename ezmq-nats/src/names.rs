//! Names on the server: the streams, the subject of each topic, the
//! consumer of each queue, the claims bucket and the keys in it.
//!
//! A topic becomes one subject token: ASCII letters, digits and `-` stay,
//! every other byte is `_` and two hex digits (`orders.eu` →
//! `orders_2eeu`). The token is a valid subject token, consumer name and
//! key, and two topics never share one.

use std::fmt::Write;

use ezmq_core::spi::Source;
use ezmq_core::Topic;

/// Every name of one prefix.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    /// `<prefix>_jobs`: the work-queue stream of every topic's jobs.
    pub(crate) jobs_stream: String,
    /// `<prefix>_delayed`: jobs waiting for their time.
    pub(crate) delayed_stream: String,
    /// `<prefix>_broadcast`: broadcasts, kept while a group has not read
    /// them (interest retention).
    pub(crate) broadcast_stream: String,
    /// `<prefix>_claims`: the key-value bucket of claims.
    pub(crate) claims_bucket: String,
    /// The durable consumer that moves due jobs out of the delayed stream.
    pub(crate) mover: String,
    prefix: String,
}

impl Names {
    pub(crate) fn new(prefix: &str) -> Self {
        Names {
            jobs_stream: format!("{prefix}_jobs"),
            delayed_stream: format!("{prefix}_delayed"),
            broadcast_stream: format!("{prefix}_broadcast"),
            claims_bucket: format!("{prefix}_claims"),
            mover: format!("{prefix}_mover"),
            prefix: prefix.to_owned(),
        }
    }

    /// The subjects of the jobs stream: `<prefix>.jobs.>`.
    pub(crate) fn jobs_subjects(&self) -> String {
        format!("{}.jobs.>", self.prefix)
    }

    /// The subjects of the delayed stream.
    pub(crate) fn delayed_subjects(&self) -> String {
        format!("{}.delayed.>", self.prefix)
    }

    /// The subjects of the broadcast stream.
    pub(crate) fn broadcast_subjects(&self) -> String {
        format!("{}.broadcast.>", self.prefix)
    }

    /// The subject a job of `queue` (a topic or a group queue) is stored
    /// under.
    pub(crate) fn job_subject(&self, queue: &str) -> String {
        format!("{}.jobs.{}", self.prefix, token(queue))
    }

    /// The subject a delayed job of `queue` waits under.
    pub(crate) fn delayed_subject(&self, queue: &str) -> String {
        format!("{}.delayed.{}", self.prefix, token(queue))
    }

    /// The subject broadcasts of `topic` are stored under.
    pub(crate) fn broadcast_subject(&self, topic: &Topic) -> String {
        format!("{}.broadcast.{}", self.prefix, token(topic.as_str()))
    }

    /// The queue a delayed job's subject names, back from its token.
    pub(crate) fn queue_of_delayed(&self, subject: &str) -> Option<String> {
        let token = subject.strip_prefix(&format!("{}.delayed.", self.prefix))?;
        untoken(token)
    }

    /// The queue a job's subject names, back from its token.
    pub(crate) fn queue_of_job(&self, subject: &str) -> Option<String> {
        let token = subject.strip_prefix(&format!("{}.jobs.", self.prefix))?;
        untoken(token)
    }

    /// The durable consumer of a topic's queue.
    pub(crate) fn queue_consumer(&self, queue: &str) -> String {
        format!("q_{}", token(queue))
    }

    /// The durable consumer of a broadcast group.
    pub(crate) fn group_consumer(&self, topic: &Topic, group: &Topic) -> String {
        format!("g_{}_{}", token(topic.as_str()), token(group.as_str()))
    }

    /// The key of claim `key` in the claims bucket.
    pub(crate) fn claim_key(&self, key: &Topic) -> String {
        token(key.as_str())
    }
}

/// The queue of `source` in the jobs stream: the topic's name (broadcast
/// groups read the broadcast stream instead).
pub(crate) fn queue_of(source: &Source) -> &str {
    source.topic().as_str()
}

/// `name` as one subject token (see the module docs).
pub(crate) fn token(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "_{b:02x}");
        }
    }
    out
}

/// The name a [`token`] was made from.
pub(crate) fn untoken(token: &str) -> Option<String> {
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'_' {
            let hex = token.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_safe_and_reversible() {
        for name in ["orders", "orders.eu", "a_b", "__ezmq|lane|high|x", "ü *>"] {
            let t = token(name);
            assert!(
                t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{t}"
            );
            assert_eq!(untoken(&t).as_deref(), Some(name));
        }
        assert_ne!(token("a.b"), token("a_2eb"));
    }

    #[test]
    fn delayed_subjects_name_their_queue() {
        let names = Names::new("ezmq");
        let subject = names.delayed_subject("orders.eu");
        assert_eq!(subject, "ezmq.delayed.orders_2eeu");
        assert_eq!(
            names.queue_of_delayed(&subject).as_deref(),
            Some("orders.eu")
        );
    }
}
