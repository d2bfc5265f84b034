//! The broker's health report ([`Backend::health`](ezmq_core::spi::Backend::health)):
//! `INFO` on a single server; on a cluster `CLUSTER NODES` for its
//! masters and their state, and `INFO` on every master.

use std::collections::HashMap;
use std::time::Duration;

use ezmq_core::{BrokerHealth, NodeHealth, Result};
use redis::{FromRedisValue, RedisError, Value};

use crate::backend::Inner;

/// The `INFO` fields shown for the whole server, with their labels.
const SERVER_FIELDS: &[(&str, &str)] = &[
    ("redis_mode", "mode"),
    ("role", "role"),
    ("maxmemory_policy", "eviction"),
];

/// The `INFO` fields shown for each node (after its uptime).
const NODE_FIELDS: &[(&str, &str)] = &[
    ("connected_clients", "clients"),
    ("used_memory_human", "memory"),
];

impl Inner {
    /// The server (`Redis`, or `Valkey` when it says so) with its
    /// version, mode, role, whether it writes an AOF and its eviction
    /// policy, then its nodes: on a single server one, `server`; on a
    /// cluster one per master, named by the first 8 characters of its id,
    /// up unless the cluster marks it failed or unlinked, with its slots
    /// and replicas. Each node that answered `INFO` shows its uptime,
    /// clients and memory.
    pub(crate) async fn health(&self) -> Result<BrokerHealth> {
        self.ensure_open()?;
        if self.config.cluster {
            Ok(cluster_health(self).await)
        } else {
            Ok(server_health(self).await)
        }
    }
}

async fn server_health(inner: &Inner) -> BrokerHealth {
    let mut conn = inner.conn();
    match redis::cmd("INFO").query_async::<String>(&mut conn).await {
        Ok(text) => {
            let node = node_facts(NodeHealth::up("server"), &text);
            server_facts(&text, false).with_node(node)
        }
        // An error reply: the server answers, and tells nothing.
        Err(err) if answered(&err) => {
            BrokerHealth::new("Redis").with_node(NodeHealth::up("server"))
        }
        Err(_) => BrokerHealth::new("Redis").with_node(NodeHealth::down("server")),
    }
}

async fn cluster_health(inner: &Inner) -> BrokerHealth {
    let mut conn = inner.conn();
    let nodes = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async::<String>(&mut conn)
        .await;
    // `INFO` goes to every master; the reply maps each one's address to
    // its text (matched to `CLUSTER NODES` below, never shown).
    let infos: HashMap<String, String> =
        match redis::cmd("INFO").query_async::<Value>(&mut conn).await {
            Ok(Value::Map(pairs)) => pairs
                .into_iter()
                .filter_map(|(addr, info)| {
                    Some((
                        String::from_redis_value(addr).ok()?,
                        String::from_redis_value(info).ok()?,
                    ))
                })
                .collect(),
            Ok(other) => String::from_redis_value(other)
                .map(|text| HashMap::from([(String::new(), text)]))
                .unwrap_or_default(),
            Err(_) => HashMap::new(),
        };
    let mut health = match infos.values().next() {
        Some(text) => server_facts(text, true),
        None => BrokerHealth::new("Redis").with_fact("mode", "cluster"),
    };
    let Ok(listing) = nodes else {
        // No node answered `CLUSTER NODES`: the cluster is down here.
        return health.with_node(NodeHealth::down("cluster"));
    };
    let masters = parse_cluster_nodes(&listing);
    health = health.with_fact("masters", masters.len());
    for master in masters {
        let name = master.id.get(..8).unwrap_or(&master.id).to_owned();
        if !master.up {
            health = health.with_node(NodeHealth::down(name));
            continue;
        }
        let mut node = NodeHealth::up(name)
            .with_fact("slots", master.slots.join(" "))
            .with_fact("replicas", master.replicas);
        if let Some(text) = infos.get(&master.addr) {
            node = node_facts(node, text);
        }
        health = health.with_node(node);
    }
    health
}

/// True when Redis answered with an error reply (it is alive).
fn answered(err: &RedisError) -> bool {
    err.code().is_some()
}

/// The report's server and facts from one `INFO` text (of one of the
/// masters, on a cluster: its role is not the cluster's).
fn server_facts(text: &str, cluster: bool) -> BrokerHealth {
    let (server, version) = match info_field(text, "valkey_version") {
        Some(version) => ("Valkey", Some(version)),
        None => ("Redis", info_field(text, "redis_version")),
    };
    let mut health = BrokerHealth::new(server);
    if let Some(version) = version {
        health = health.with_fact("version", version);
    }
    for (field, label) in SERVER_FIELDS {
        if cluster && *field == "role" {
            continue;
        }
        if let Some(value) = info_field(text, field) {
            health = health.with_fact(*label, value);
        }
    }
    match info_field(text, "aof_enabled") {
        Some("1") => health.with_fact("aof", "on"),
        Some(_) => health.with_fact("aof", "off"),
        None => health,
    }
}

/// `node` with the uptime, clients and memory of its `INFO` text.
fn node_facts(mut node: NodeHealth, text: &str) -> NodeHealth {
    if let Some(secs) = info_field(text, "uptime_in_seconds").and_then(|s| s.parse().ok()) {
        node = node.with_uptime(Duration::from_secs(secs));
    }
    for (field, label) in NODE_FIELDS {
        if let Some(value) = info_field(text, field) {
            node = node.with_fact(*label, value);
        }
    }
    node
}

/// The value of `field` in an `INFO` reply (`field:value` lines).
fn info_field<'a>(text: &'a str, field: &str) -> Option<&'a str> {
    text.lines()
        .filter_map(|line| line.trim_end_matches('\r').split_once(':'))
        .find(|(name, _)| *name == field)
        .map(|(_, value)| value)
}

/// A master as `CLUSTER NODES` lists it.
#[derive(Debug, PartialEq)]
struct Master {
    id: String,
    /// `ip:port`, to find its `INFO`; never shown.
    addr: String,
    up: bool,
    slots: Vec<String>,
    replicas: usize,
}

/// The masters of a `CLUSTER NODES` reply, in slot order; each line is
/// `<id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong>
/// <epoch> <link-state> <slot>...`.
fn parse_cluster_nodes(listing: &str) -> Vec<Master> {
    let lines: Vec<Vec<&str>> = listing
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|fields| fields.len() >= 8)
        .collect();
    let mut masters: Vec<Master> = lines
        .iter()
        .filter(|fields| fields[2].split(',').any(|flag| flag == "master"))
        .map(|fields| {
            let failed = fields[2]
                .split(',')
                .any(|flag| matches!(flag, "fail" | "fail?" | "handshake" | "noaddr"));
            Master {
                id: fields[0].to_owned(),
                addr: fields[1]
                    .split(['@', ','])
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
                up: !failed && fields[7] == "connected",
                slots: fields[8..]
                    .iter()
                    .filter(|slot| !slot.starts_with('['))
                    .map(|slot| (*slot).to_owned())
                    .collect(),
                replicas: lines.iter().filter(|other| other[3] == fields[0]).count(),
            }
        })
        .collect();
    masters.sort_by_key(|m| {
        let first = m
            .slots
            .first()
            .and_then(|s| s.split('-').next()?.parse().ok());
        (first.unwrap_or(u32::MAX), m.id.clone())
    });
    masters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_masters_of_cluster_nodes() {
        let listing = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,h4 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 master,fail - 0 1426238318243 3 disconnected 10923-16383
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460
";
        let masters = parse_cluster_nodes(listing);
        let ids: Vec<&str> = masters.iter().map(|m| &m.id[..8]).collect();
        assert_eq!(ids, ["e7d1eecc", "67ed2db8", "292f8b36"]);
        assert_eq!(masters[0].addr, "127.0.0.1:30001");
        assert_eq!(masters[0].replicas, 1);
        assert_eq!(masters[0].slots, ["0-5460"]);
        assert!(masters[0].up && masters[1].up && !masters[2].up);
    }

    #[test]
    fn server_facts_from_info() {
        let text = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nuptime_in_seconds:740\r\n\
                    # Clients\r\nconnected_clients:3\r\n# Persistence\r\naof_enabled:0\r\n\
                    # Replication\r\nrole:master\r\n";
        let health = server_facts(text, false);
        assert_eq!(health.server, "Redis");
        assert_eq!(health.fact("version"), Some("7.0.15"));
        assert_eq!(health.fact("role"), Some("master"));
        assert_eq!(health.fact("aof"), Some("off"));
        let node = node_facts(NodeHealth::up("server"), text);
        assert_eq!(node.fact("uptime"), Some("12m 20s"));
        assert_eq!(node.fact("clients"), Some("3"));
    }
}
