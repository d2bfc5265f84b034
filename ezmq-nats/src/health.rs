//! The broker's health report ([`Backend::health`](ezmq_core::spi::Backend::health)):
//! what the server told when the connection opened (its `INFO`), the
//! connection's state, and the info of ezmq's jobs stream (one request:
//! its messages, consumers and the servers that hold it).
//!
//! Not the JetStream account's info: async-nats 0.52 cannot read a 2.9
//! server's answer to it (fields it requires are missing there).

use async_nats::connection::State;
use async_nats::jetstream::stream::ClusterInfo;
use ezmq_core::{BrokerHealth, Error, NodeHealth, Result};

use crate::backend::Inner;

/// How many characters of a server id name its node (a server with no
/// name of its own is named by its id, 56 characters).
const ID_PREFIX: usize = 8;

/// `NATS` with its version, cluster (when it is in one), whether it runs
/// JetStream, its largest payload, and ezmq's jobs stream's messages,
/// bytes and consumers. The nodes are the servers holding that stream,
/// by their `server_name` (the first 8 characters of a server id, for a
/// server with no name of its own): its leader, up, and each replica, up
/// while it is current and online. Without that stream's info (it was not
/// answered) the node is the server this client is connected to, down.
pub(crate) async fn report(inner: &Inner) -> Result<BrokerHealth> {
    inner.ensure_open()?;
    let info = inner.client.server_info();
    let connection = match inner.client.connection_state() {
        State::Connected => "connected",
        State::Pending => "connecting",
        State::Disconnected => "disconnected",
    };
    let stream = match inner.timed("health", inner.jobs.get_info()).await {
        Ok(stream) => Some(stream),
        Err(Error::Shutdown) => return Err(Error::Shutdown),
        Err(_) => None,
    };
    let mut health = BrokerHealth::new("NATS").with_fact("version", &info.version);
    if let Some(cluster) = info.cluster.as_deref().filter(|c| !c.is_empty()) {
        health = health.with_fact("cluster", cluster);
    }
    health = health
        .with_fact("jetstream", if info.jetstream { "on" } else { "off" })
        .with_fact(
            "max payload",
            bytes_text(u64::try_from(info.max_payload).unwrap_or(u64::MAX)),
        )
        .with_fact("connection", connection);
    let own_name = if info.server_name.is_empty() {
        info.server_id.as_str()
    } else {
        info.server_name.as_str()
    };
    let Some(stream) = stream else {
        return Ok(health.with_node(NodeHealth::down(node_name(own_name))));
    };
    let state = &stream.state;
    health = health
        .with_fact(
            "jobs stream",
            format!("{} messages, {}", state.messages, bytes_text(state.bytes)),
        )
        .with_fact("consumers", state.consumer_count);
    let nodes = match stream.cluster.as_ref() {
        Some(cluster) if cluster.leader.is_some() => stream_servers(cluster),
        _ => vec![NodeHealth::up(node_name(own_name))],
    };
    Ok(nodes
        .into_iter()
        .fold(health, |health, node| health.with_node(node)))
}

/// The servers holding a stream: its leader, then its replicas.
fn stream_servers(cluster: &ClusterInfo) -> Vec<NodeHealth> {
    let leader = cluster
        .leader
        .iter()
        .map(|name| NodeHealth::up(node_name(name)).with_fact("role", "stream leader"));
    let replicas = cluster.replicas.iter().map(|peer| {
        let node = if peer.current && !peer.offline {
            NodeHealth::up(node_name(&peer.name))
        } else {
            NodeHealth::down(node_name(&peer.name))
        };
        let node = node.with_fact("role", "stream replica");
        match peer.lag {
            Some(lag) if lag > 0 => node.with_fact("lag", format!("{lag} operations")),
            _ => node,
        }
    });
    leader.chain(replicas).collect()
}

/// A server's name as a node's: a server id (56 upper-case letters and
/// digits, starting with `N`) cut to its first 8 characters.
fn node_name(name: &str) -> String {
    let is_id = name.len() == 56
        && name.starts_with('N')
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    if name.is_empty() {
        "server".to_owned()
    } else if is_id {
        name.chars().take(ID_PREFIX).collect()
    } else {
        name.to_owned()
    }
}

/// `n` bytes as `512 B`, `1.5 KiB`, `3.2 MiB`, `1.1 GiB`.
#[allow(clippy::cast_precision_loss)] // one decimal shown
fn bytes_text(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_in_binary_units() {
        assert_eq!(bytes_text(512), "512 B");
        assert_eq!(bytes_text(1536), "1.5 KiB");
        assert_eq!(bytes_text(1 << 20), "1.0 MiB");
        assert_eq!(bytes_text(3 << 30), "3.0 GiB");
    }

    #[test]
    fn server_ids_are_cut() {
        let id = "NABEMF5XQ2ZKJ3X7RAVLNNXCJ3WZ6VQ5QCJ2G7R7H5NXCWGV3QWQ7M3D";
        assert_eq!(id.len(), 56);
        assert_eq!(node_name(id), "NABEMF5X");
        assert_eq!(node_name("nats-1"), "nats-1");
        assert_eq!(node_name(""), "server");
    }
}
