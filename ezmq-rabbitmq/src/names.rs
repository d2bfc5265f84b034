//! Queue, exchange and header names.

use std::borrow::Cow;

use ezmq_core::Topic;
use lapin::types::ShortString;

use crate::error::RabbitError;

/// Longest AMQP short string (queue, exchange and header names).
const MAX_NAME: usize = 255;

/// Names of everything ezmq declares, under the configured prefix.
#[derive(Clone, Debug)]
pub(crate) struct Names {
    prefix: String,
}

impl Names {
    pub(crate) fn new(prefix: &str) -> Self {
        Names {
            prefix: prefix.to_owned(),
        }
    }

    /// The stream of presence records (see `presence.rs`).
    pub(crate) fn presence_stream(&self) -> String {
        format!("{}__ezmq|presence", self.prefix)
    }

    /// The queue of a topic: `<prefix><topic>` (without a prefix, the
    /// topic itself, borrowed: a topic always fits a short string).
    pub(crate) fn topic_queue<'a>(&self, topic: &'a Topic) -> Cow<'a, str> {
        if self.prefix.is_empty() && topic.as_str().len() <= MAX_NAME {
            return Cow::Borrowed(topic.as_str());
        }
        Cow::Owned(fit(format!("{}{}", self.prefix, topic)))
    }

    /// The fan-out exchange of a broadcast topic.
    pub(crate) fn fanout_exchange(&self, topic: &Topic) -> String {
        fit(format!("{}__ezmq|fanout|{}", self.prefix, topic))
    }

    /// The queue of consumer group `group` of broadcast topic `topic`.
    pub(crate) fn group_queue(&self, topic: &Topic, group: &Topic) -> String {
        fit(format!("{}__ezmq|group|{}|{}", self.prefix, topic, group))
    }

    /// The queue of an exclusive claim.
    pub(crate) fn claim_queue(&self, key: &Topic) -> String {
        fit(format!("{}__ezmq|claim|{}", self.prefix, key))
    }

    /// The gate queue of a keyed claim: its one message is the claim.
    pub(crate) fn hold_queue(&self, key: &Topic) -> String {
        fit(format!("{}__ezmq|hold|{}", self.prefix, key))
    }

    /// The record queue of a keyed claim: its one message names the
    /// holder's token.
    pub(crate) fn holder_queue(&self, key: &Topic) -> String {
        fit(format!("{}__ezmq|holder|{}", self.prefix, key))
    }

    /// The headers exchange and the queue of delay level `level`.
    pub(crate) fn delay_level(&self, level: u8) -> String {
        format!("{}__ezmq|delay|L{level:02}", self.prefix)
    }

    /// The direct exchange delayed messages leave the levels through,
    /// bound to each destination queue with the queue's name.
    pub(crate) fn delay_deliver(&self) -> String {
        format!("{}__ezmq|delay|deliver", self.prefix)
    }
}

/// The header carrying bit `level` of a message's delay.
pub(crate) fn delay_bit_header(level: u8) -> String {
    format!("ezmq-delay-b{level:02}")
}

/// `name` as it is, or cut with a stable hash of the whole appended when it
/// is longer than AMQP allows (so distinct long names stay distinct, the
/// same on every client).
fn fit(name: String) -> String {
    if name.len() <= MAX_NAME {
        return name;
    }
    let hash = fnv1a(name.as_bytes());
    let mut cut = MAX_NAME - 17;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}~{hash:016x}", &name[..cut])
}

/// FNV-1a, 64 bits: stable across processes and Rust versions.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `s` as an AMQP short string, or an error naming `what` it is.
pub(crate) fn short(what: &'static str, s: &str) -> Result<ShortString, RabbitError> {
    ShortString::try_new(s).map_err(|_| RabbitError::NameTooLong {
        what,
        name: s.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_stably() {
        let names = Names::new("p.");
        let t = Topic::new("t".repeat(200)).unwrap();
        let g = Topic::new("g".repeat(200)).unwrap();
        let q = names.group_queue(&t, &g);
        assert_eq!(q.len(), 255);
        assert_eq!(q, names.group_queue(&t, &g));
        let g2 = Topic::new(format!("{}h", "g".repeat(199))).unwrap();
        assert_ne!(q, names.group_queue(&t, &g2));
        assert_eq!(
            names.topic_queue(&Topic::new("orders").unwrap()),
            "p.orders"
        );
    }
}
