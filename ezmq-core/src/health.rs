//! What a broker says of its own health
//! ([`Admin::health`](crate::Admin::health)): which server it is, a few
//! facts about it, and each node it is made of, up or down.
//!
//! A report never holds an address, a URL, a user name or a password: it
//! is made to be shown (a dashboard page, a log line). Nodes are named by
//! their id (a prefix of it) or by their role ("server"), and a node that
//! does not answer is reported down without the error that said so (an
//! error's text can name the address it failed on).

use std::fmt;
use std::time::Duration;

/// The broker's health as one [`Admin::health`](crate::Admin::health)
/// call saw it.
///
/// What each backend reports (each in one round trip, or one per node):
///
/// - Disque: `INFO` on every node of the table `HELLO` gave: the version
///   (and the embedded server's own version and mode), the number of
///   nodes; per node (the first 8 characters of its id) its uptime,
///   clients, memory, jobs and queues, and its priority when failing or
///   leaving.
/// - Redis: `INFO`: the version, mode, role, eviction policy, whether it
///   writes an AOF; the node `server` with its uptime, clients and memory.
///   On a cluster, `CLUSTER NODES` too: one node per master (its id's
///   first 8 characters), down when the cluster marks it failed, with its
///   slots and replicas.
/// - RabbitMQ: the AMQP connection's state (`open`, `blocked` by a
///   resource alarm, `reconnecting`), its reconnections and negotiated
///   heartbeat, frame and channel limits; the node `server`, up when a
///   passive declaration of `amq.direct` is answered. No version: the
///   AMQP client does not keep the server's properties.
/// - PostgreSQL: one query: the version, role (primary or standby),
///   ezmq's schema, this client's pool; the node `server` with its
///   uptime, the database's size and its connections.
/// - NATS: the server's `INFO` (version, cluster, JetStream, largest
///   payload), the connection's state, and the info of ezmq's jobs stream
///   (its messages and consumers); its nodes are the servers holding that
///   stream (leader and replicas, by server name), or the server this
///   client is connected to.
/// - Kafka: one metadata request: the number of brokers and topics, the
///   broker that answered; one node per broker, `broker <id>`.
///
/// ```
/// use ezmq_core::{BrokerHealth, NodeHealth};
///
/// let health = BrokerHealth::new("Redis")
///     .with_fact("version", "7.2.4")
///     .with_node(NodeHealth::up("server").with_fact("clients", 12));
/// assert_eq!(health.fact("version"), Some("7.2.4"));
/// assert!(health.all_up());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerHealth {
    /// The server product: `Disque`, `Redis`, `RabbitMQ`, `PostgreSQL`,
    /// `NATS`, `Kafka`.
    pub server: String,
    /// Facts about the whole broker, in the order to show them: version,
    /// mode, then what else it tells (each a label and a value).
    pub facts: Vec<(String, String)>,
    /// The nodes the broker is made of (one, `server`, for a single
    /// server).
    pub nodes: Vec<NodeHealth>,
}

impl BrokerHealth {
    /// A report on `server` (its product name) with no fact and no node
    /// yet.
    pub fn new(server: impl Into<String>) -> Self {
        BrokerHealth {
            server: server.into(),
            facts: Vec::new(),
            nodes: Vec::new(),
        }
    }

    /// Adds a fact: a label (`version`) and its value, shown after the
    /// facts added before it.
    #[must_use]
    pub fn with_fact(mut self, label: impl Into<String>, value: impl fmt::Display) -> Self {
        self.facts.push((label.into(), value.to_string()));
        self
    }

    /// Adds the fact `uptime`: `uptime` as `3d 4h`, `2h 5m`, `5m 12s` or
    /// `12s`.
    #[must_use]
    pub fn with_uptime(self, uptime: Duration) -> Self {
        self.with_fact("uptime", uptime_text(uptime))
    }

    /// Adds a node, shown after the nodes added before it.
    #[must_use]
    pub fn with_node(mut self, node: NodeHealth) -> Self {
        self.nodes.push(node);
        self
    }

    /// The value of the first fact labelled `label`.
    pub fn fact(&self, label: &str) -> Option<&str> {
        fact(&self.facts, label)
    }

    /// True when there is at least one node and every node is up.
    pub fn all_up(&self) -> bool {
        !self.nodes.is_empty() && self.nodes.iter().all(|node| node.up)
    }
}

/// One node of a broker: its name, whether it answered, and what it told.
///
/// ```
/// use ezmq_core::NodeHealth;
///
/// let node = NodeHealth::up("3f2a91c0").with_fact("jobs", 42);
/// assert!(node.up);
/// assert!(!NodeHealth::down("77b0e4d2").up);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeHealth {
    /// The node's id (a prefix of it: `3f2a91c0`, `broker 1`) or role
    /// (`server`); never its address.
    pub name: String,
    /// True when the node answered.
    pub up: bool,
    /// What the node told about itself (clients, memory, uptime, ...), in
    /// the order to show them; for a node that is down, at most what the
    /// client knows of it (its connection's state).
    pub facts: Vec<(String, String)>,
}

impl NodeHealth {
    /// A node named `name` that answered.
    pub fn up(name: impl Into<String>) -> Self {
        NodeHealth {
            name: name.into(),
            up: true,
            facts: Vec::new(),
        }
    }

    /// A node named `name` that did not answer (refused, failed or too
    /// slow). Its error is not kept: its text can hold an address.
    pub fn down(name: impl Into<String>) -> Self {
        NodeHealth {
            up: false,
            ..NodeHealth::up(name)
        }
    }

    /// Adds a fact: a label (`clients`) and its value, shown after the
    /// facts added before it.
    #[must_use]
    pub fn with_fact(mut self, label: impl Into<String>, value: impl fmt::Display) -> Self {
        self.facts.push((label.into(), value.to_string()));
        self
    }

    /// Adds the fact `uptime`, as [`BrokerHealth::with_uptime`] does.
    #[must_use]
    pub fn with_uptime(self, uptime: Duration) -> Self {
        self.with_fact("uptime", uptime_text(uptime))
    }

    /// The value of the first fact labelled `label`.
    pub fn fact(&self, label: &str) -> Option<&str> {
        fact(&self.facts, label)
    }
}

fn fact<'a>(facts: &'a [(String, String)], label: &str) -> Option<&'a str> {
    facts
        .iter()
        .find(|(l, _)| l == label)
        .map(|(_, value)| value.as_str())
}

/// `uptime` in its two largest units: `3d 4h`, `2h 5m`, `5m 12s`, `12s`.
fn uptime_text(uptime: Duration) -> String {
    let s = uptime.as_secs();
    let (days, hours, minutes, seconds) = (s / 86_400, s / 3_600 % 24, s / 60 % 60, s % 60);
    if days > 0 {
        format!("{days}d {hours}h")
    } else if hours > 0 {
        format!("{hours}h {minutes}m")
    } else if minutes > 0 {
        format!("{minutes}m {seconds}s")
    } else {
        format!("{seconds}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_keep_their_order() {
        let health = BrokerHealth::new("Disque")
            .with_fact("version", "1.0")
            .with_fact("nodes", 2)
            .with_node(NodeHealth::up("aaaaaaaa"))
            .with_node(NodeHealth::down("bbbbbbbb"));
        assert_eq!(
            health.facts,
            [
                ("version".to_owned(), "1.0".to_owned()),
                ("nodes".to_owned(), "2".to_owned())
            ]
        );
        assert_eq!(health.fact("nodes"), Some("2"));
        assert_eq!(health.fact("mode"), None);
        assert!(!health.all_up());
        assert!(!BrokerHealth::new("Redis").all_up());
    }

    #[test]
    fn uptime_in_two_units() {
        let text = |s| uptime_text(Duration::from_secs(s));
        assert_eq!(text(12), "12s");
        assert_eq!(text(312), "5m 12s");
        assert_eq!(text(2 * 3_600 + 300), "2h 5m");
        assert_eq!(text(3 * 86_400 + 4 * 3_600 + 59), "3d 4h");
        let node = NodeHealth::up("server").with_uptime(Duration::from_secs(60));
        assert_eq!(node.fact("uptime"), Some("1m 0s"));
    }
}
