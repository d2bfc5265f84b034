//! The broker's health report ([`Backend::health`](ezmq_core::spi::Backend::health)):
//! `INFO` on every node of the table (the one `HELLO` gave), all at once.

use std::time::Duration;

use ezmq_core::{BrokerHealth, NodeHealth, Result};
use redis::Value;

use crate::backend::DisqueBackend;
use crate::error::DisqueError;
use crate::node::Node;

/// The `INFO` fields shown for each node, with their labels.
const NODE_FIELDS: &[(&str, &str)] = &[
    ("connected_clients", "clients"),
    ("used_memory_human", "memory"),
    ("registered_jobs", "jobs"),
    ("registered_queues", "queues"),
];

/// What a node answered to `INFO`.
enum Answer {
    /// Its `INFO` text.
    Info(String),
    /// An error reply (or a reply that is not text): it is alive, and
    /// told nothing.
    Refused,
    /// Nothing: refused, reset or silent until the command timeout.
    Silent,
}

impl DisqueBackend {
    /// The server (`Disque`), its version (and the embedded server's own
    /// version and mode) from the first node that answers, the number of
    /// nodes in the table, then one node per table entry, named by the
    /// first 8 characters of its id: up when it answered `INFO` now, with
    /// its uptime, clients, memory, jobs and queues, and its `HELLO`
    /// priority when it is not 1 (failing or leaving).
    pub(crate) async fn health_report(&self) -> Result<BrokerHealth> {
        self.ensure_open()?;
        let nodes = self.shared.snapshot();
        let timeout = self.shared.config.command_timeout;
        let answers = futures::future::join_all(nodes.iter().map(|node| info(node, timeout))).await;
        let mut health = BrokerHealth::new("Disque");
        let first = answers.iter().find_map(|answer| match answer {
            Answer::Info(text) => Some(text.as_str()),
            Answer::Refused | Answer::Silent => None,
        });
        if let Some(text) = first {
            for (field, label) in [
                ("disque_version", "version"),
                ("ezmq_version", "ezmq server"),
                ("disque_mode", "mode"),
            ] {
                if let Some(value) = info_field(text, field) {
                    health = health.with_fact(label, value);
                }
            }
        }
        health = health.with_fact("nodes", nodes.len());
        for (node, answer) in nodes.iter().zip(&answers) {
            health = health.with_node(node_health(node, answer));
        }
        Ok(health)
    }
}

/// `INFO` on `node`, within `timeout`.
async fn info(node: &Node, timeout: Duration) -> Answer {
    match node.query("INFO", &redis::cmd("INFO"), timeout).await {
        Ok(Value::BulkString(bytes)) => Answer::Info(String::from_utf8_lossy(&bytes).into_owned()),
        Ok(Value::VerbatimString { text, .. }) => Answer::Info(text),
        Ok(_) | Err(DisqueError::Server { .. }) => Answer::Refused,
        Err(_) => Answer::Silent,
    }
}

/// One node's entry: never its address, nor the error it failed with.
fn node_health(node: &Node, answer: &Answer) -> NodeHealth {
    let id = &node.info.id;
    let name = id.get(..8).unwrap_or(id);
    let text = match answer {
        Answer::Silent => return NodeHealth::down(name),
        Answer::Refused => return NodeHealth::up(name),
        Answer::Info(text) => text,
    };
    let mut health = NodeHealth::up(name);
    if let Some(secs) = info_field(text, "uptime_in_seconds").and_then(|s| s.parse().ok()) {
        health = health.with_uptime(Duration::from_secs(secs));
    }
    for (field, label) in NODE_FIELDS {
        if let Some(value) = info_field(text, field) {
            health = health.with_fact(*label, value);
        }
    }
    match node.priority() {
        1 => health,
        p if p >= 100 => health.with_fact("priority", format!("{p} (failing or leaving)")),
        p => health.with_fact("priority", format!("{p} (possibly failing)")),
    }
}

/// The value of `field` in an `INFO` reply (`field:value` lines).
fn info_field<'a>(text: &'a str, field: &str) -> Option<&'a str> {
    text.lines()
        .filter_map(|line| line.trim_end_matches('\r').split_once(':'))
        .find(|(name, _)| *name == field)
        .map(|(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_info_fields() {
        let text = "# Server\r\ndisque_version:1.0-rc1\r\nuptime_in_seconds:42\r\n\r\n# Jobs\r\nregistered_jobs:3\r\n";
        assert_eq!(info_field(text, "disque_version"), Some("1.0-rc1"));
        assert_eq!(info_field(text, "registered_jobs"), Some("3"));
        assert_eq!(info_field(text, "uptime_in_days"), None);
    }
}
