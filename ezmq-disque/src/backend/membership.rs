//! Cluster membership: the node table learned with `HELLO` (from the known
//! nodes, then the seeds), kept fresh in the background, and the probes
//! that bring nodes marked down back.

use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use crate::commands::abbreviate;
use crate::error::DisqueError;
use crate::node::{parse_hello, Node, NodeInfo};

impl Shared {
    /// `HELLO` on `node`; returns the node table it reports.
    async fn hello(&self, node: &Node) -> Result<Vec<NodeInfo>, DisqueError> {
        let value = node
            .query("HELLO", &redis::cmd("HELLO"), self.config.command_timeout)
            .await?;
        parse_hello(&value, node.addr())
            .map(|(_, nodes)| nodes)
            .ok_or_else(|| {
                if is_redis_hello(&value) {
                    DisqueError::NotDisque {
                        addr: node.addr().to_owned(),
                        advice: "a Redis server answers there (its HELLO is Redis'); use a \
                                 redis:// URL",
                    }
                } else {
                    DisqueError::UnexpectedReply {
                        command: "HELLO",
                        addr: node.addr().to_owned(),
                        reply: abbreviate(&value),
                    }
                }
            })
    }

    fn temp_node(&self, addr: &str) -> Result<Node, DisqueError> {
        Node::new(
            NodeInfo {
                id: String::new(),
                addr: addr.to_owned(),
                priority: 1,
            },
            &self.config,
            0,
        )
    }

    /// Learns the node table from the first seed that answers `HELLO`.
    pub(super) async fn refresh_from_seeds(&self) -> Result<(), DisqueError> {
        let mut last = DisqueError::NoNodes;
        for seed in &self.config.seeds {
            let node = match self.temp_node(seed) {
                Ok(node) => node,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            match self.hello(&node).await {
                Ok(infos) => {
                    self.install(infos)?;
                    return Ok(());
                }
                Err(e) => {
                    tracing::debug!(seed = %seed, cause = %e, "Disque seed not usable");
                    last = e;
                }
            }
        }
        Err(last)
    }

    /// Refreshes the node table from the known nodes, then the seeds.
    pub(crate) async fn refresh(&self) -> Result<(), DisqueError> {
        for node in self.by_priority().iter() {
            if let Ok(infos) = self.hello(node).await {
                return self.install(infos);
            }
        }
        self.refresh_from_seeds().await
    }

    /// Replaces the node table, keeping the connections of nodes whose id
    /// and address are unchanged.
    pub(super) fn install(&self, mut infos: Vec<NodeInfo>) -> Result<(), DisqueError> {
        infos.sort_by(|a, b| a.id.cmp(&b.id));
        infos.dedup_by(|a, b| a.id == b.id);
        let old = self.snapshot();
        let mut nodes = Vec::with_capacity(infos.len());
        for info in infos {
            let kept = old
                .iter()
                .find(|n| n.info.id == info.id && n.info.addr == info.addr);
            match kept {
                Some(node) => {
                    node.set_priority(info.priority);
                    nodes.push(Arc::clone(node));
                }
                None => {
                    tracing::info!(id = %info.id, addr = %info.addr, "Disque node discovered");
                    nodes.push(Arc::new(Node::new(
                        info,
                        &self.config,
                        self.config.getjob_pool_size,
                    )?));
                }
            }
        }
        for gone in old
            .iter()
            .filter(|o| !nodes.iter().any(|n| Arc::ptr_eq(n, o)))
        {
            tracing::info!(id = %gone.info.id, addr = %gone.addr(), "Disque node left the table");
        }
        if nodes.is_empty() {
            return Err(DisqueError::NoNodes);
        }
        if let Ok(mut table) = self.nodes.write() {
            *table = nodes.into();
        }
        Ok(())
    }
}

/// How often nodes marked down are probed.
const PROBE_INTERVAL: Duration = Duration::from_millis(250);

/// Refreshes the node table every `refresh_interval`, and probes the nodes
/// marked down every [`PROBE_INTERVAL`] (off the request path: commands
/// never wait for a node known to be down to answer).
pub(super) async fn refresh_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.config.refresh_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut probe_tick = tokio::time::interval(PROBE_INTERVAL);
    probe_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let refresh = tokio::select! {
            () = shared.cancel.cancelled() => break,
            _ = tick.tick() => true,
            _ = probe_tick.tick() => false,
        };
        if refresh {
            let refresh = shared.refresh();
            tokio::select! {
                () = shared.cancel.cancelled() => break,
                result = refresh => {
                    if let Err(e) = result {
                        tracing::warn!(cause = %e, "Disque node table refresh failed");
                    }
                }
            }
        } else {
            tokio::select! {
                () = shared.cancel.cancelled() => break,
                () = probe_down_nodes(&shared) => {}
            }
        }
    }
}

/// PINGs every node marked down; those that answer are up again.
async fn probe_down_nodes(shared: &Shared) {
    let nodes = shared.snapshot();
    let probes = nodes.iter().filter(|n| n.is_down()).map(|node| async move {
        if node.answers_ping().await {
            node.mark_up();
        }
    });
    futures::future::join_all(probes).await;
}

/// True for the reply Redis 6 or later gives `HELLO`: its server
/// properties (`server`, `redis`, `version`, ...), where Disque's starts
/// with its protocol version.
fn is_redis_hello(value: &redis::Value) -> bool {
    use redis::Value;
    match value {
        Value::Map(_) => true,
        Value::Array(items) => {
            matches!(items.first(), Some(Value::BulkString(key)) if key.as_slice() == b"server")
        }
        _ => false,
    }
}
