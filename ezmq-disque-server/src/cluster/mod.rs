//! An in-process multi-node cluster ([`EmbeddedCluster`]): every node has its
//! own TCP port, node id and store, and the nodes talk through an in-process
//! bus instead of Disque's TCP cluster bus, so tests can kill, restart,
//! partition, freeze and hang nodes.
//!
//! * `bus.rs`: node slots, reachability, delivery;
//! * `messages.rs`: the node-to-node messages;
//! * `replication.rs`: REPLJOB/GOTJOB, acks, requeue coordination;
//! * `resend.rs`: the periodic REPLJOB / SETACK resends and new replicas;
//! * `federation.rs`: NEEDJOBS/YOURJOBS.

mod bus;
pub(crate) mod federation;
pub(crate) mod messages;
pub(crate) mod replication;
mod resend;

pub(crate) use bus::{Bus, BusTiming, Envelope, Link};
pub(crate) use replication::{AckWait, ReplWait};

use crate::state::{now, Node};
use crate::{EmbeddedDisque, Error, ServerConfig};
use messages::Msg;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio_util::sync::CancellationToken;

/// Period of the cluster housekeeping of every node (NEEDJOBS for blocked
/// queues, REPLJOB and SETACK resends, removal of confirmed acks).
pub(crate) const CLUSTER_TICK: Duration = Duration::from_millis(100);

/// How long [`EmbeddedCluster::restart`] retries binding the old port.
const REBIND_FOR: Duration = Duration::from_secs(10);

/// Address and id of one node of an [`EmbeddedCluster`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// The node's client address.
    pub addr: SocketAddr,
    /// The node's 40-hex-char id (kept across restarts).
    pub node_id: String,
}

/// An in-process Disque cluster of `n` nodes for tests.
///
/// Each node listens on its own TCP port and behaves towards clients like a
/// node of a real Disque cluster: HELLO lists every node, jobs are
/// replicated (default `REPLICATE` is min(3, n)), acks reach every copy,
/// replicas requeue a job whose queueing node is gone, and GETJOB on a node
/// without jobs pulls them from the others (federation). The nodes talk
/// through an in-process bus, so [`kill`](Self::kill),
/// [`restart`](Self::restart), [`partition`](Self::partition),
/// [`heal`](Self::heal), [`freeze`](Self::freeze) (a node stopped as by
/// `SIGSTOP`, which the others notice only after the node timeout),
/// [`thaw`](Self::thaw), [`hang`](Self::hang) and [`resume`](Self::resume)
/// are instant and deterministic.
///
/// Dropping the cluster stops every node; [`shutdown`](Self::shutdown) also
/// waits for their tasks.
///
/// ```no_run
/// # async fn demo() -> Result<(), ezmq_disque_server::Error> {
/// use ezmq_disque_server::EmbeddedCluster;
/// let cluster = EmbeddedCluster::start(3).await?;
/// println!("node 0 at {}", cluster.node(0).addr);
/// cluster.kill(0).await;      // port closed, all its jobs lost
/// cluster.restart(0).await?;  // back, empty, same port and id
/// cluster.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct EmbeddedCluster {
    bus: Arc<Bus>,
    config: ServerConfig,
    nodes: Vec<ClusterNode>,
    running: tokio::sync::Mutex<Vec<Option<EmbeddedDisque>>>,
}

impl EmbeddedCluster {
    /// Starts `n` nodes on 127.0.0.1, each on a free port.
    pub async fn start(n: usize) -> Result<EmbeddedCluster, Error> {
        Self::start_with(n, ServerConfig::default().with_port(0)).await
    }

    /// Starts `n` nodes with `config`: port 0 gives each node a free port,
    /// port `P` gives ports `P, P+1, ...`. Node ids are random (a configured
    /// node id is ignored); every other setting applies to every node.
    pub async fn start_with(n: usize, config: ServerConfig) -> Result<EmbeddedCluster, Error> {
        if n == 0 || n > usize::from(u16::MAX) {
            return Err(Error::InvalidClusterSize(n));
        }
        let mut listeners = Vec::with_capacity(n);
        for i in 0..n {
            let port = match config.port {
                0 => 0,
                p => p
                    .checked_add(i as u16)
                    .ok_or(Error::InvalidClusterSize(n))?,
            };
            listeners.push(crate::bind(SocketAddr::new(config.bind, port)).await?);
        }
        let mut nodes = Vec::with_capacity(n);
        let mut rng = crate::job::Rng::new();
        for l in &listeners {
            nodes.push(ClusterNode {
                addr: l.local_addr()?,
                node_id: rng.hex40(),
            });
        }
        let bus = Arc::new(Bus::new(
            nodes
                .iter()
                .map(|c| (c.node_id.clone(), c.addr.ip().to_string(), c.addr.port()))
                .collect(),
            BusTiming {
                node_timeout: config.cluster_node_timeout,
                repl_retry: config.cluster_repl_retry,
            },
        ));
        let cluster = EmbeddedCluster {
            bus,
            config,
            nodes,
            running: tokio::sync::Mutex::new((0..n).map(|_| None).collect()),
        };
        {
            let mut running = cluster.running.lock().await;
            for (i, listener) in listeners.into_iter().enumerate() {
                running[i] = Some(cluster.launch(i, listener)?);
            }
        }
        Ok(cluster)
    }

    fn launch(&self, i: usize, listener: TcpListener) -> Result<EmbeddedDisque, Error> {
        let (tx, rx) = mpsc::unbounded_channel();
        let link = Link {
            bus: self.bus.clone(),
            me: i as u16,
        };
        let server = EmbeddedDisque::launch(
            listener,
            &self.config,
            self.nodes[i].node_id.clone(),
            Some((link, rx)),
        )?;
        self.bus.set_up(i, tx);
        Ok(server)
    }

    /// Number of nodes (running or not).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a cluster has at least one node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Address and id of node `i`. Panics when `i >= len()`.
    pub fn node(&self, i: usize) -> ClusterNode {
        self.nodes[i].clone()
    }

    /// Every node's address, in node order.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.nodes.iter().map(|n| n.addr).collect()
    }

    /// True unless node `i` was killed (a partitioned node is running).
    pub fn is_running(&self, i: usize) -> bool {
        self.bus.is_up(i as u16)
    }

    /// Stops node `i` as if its process died: its port is closed, its
    /// clients are disconnected and all its jobs are lost. The other nodes
    /// see it with priority 10 in HELLO. Ends a [`freeze`](Self::freeze) or
    /// [`hang`](Self::hang) (a restarted node runs). Does nothing else if
    /// it is not running.
    pub async fn kill(&self, i: usize) {
        let server = self.running.lock().await[i].take();
        self.bus.set_down(i);
        if let Some(server) = server {
            server.shutdown().await;
        }
        tracing::info!(node = i, "cluster node killed");
    }

    /// Brings node `i` back **empty** (no jobs, no queues) on the same port
    /// and with the **same node id**, retrying for up to 10 s while the port
    /// is released. A running node is killed first.
    pub async fn restart(&self, i: usize) -> Result<(), Error> {
        self.kill(i).await;
        let addr = self.nodes[i].addr;
        let deadline = tokio::time::Instant::now() + REBIND_FOR;
        let listener = loop {
            match crate::bind(addr).await {
                Ok(l) => break l,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(cause = %e, %addr, "port not free yet, retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e),
            }
        };
        let mut running = self.running.lock().await;
        running[i] = Some(self.launch(i, listener)?);
        tracing::info!(node = i, "cluster node restarted");
        Ok(())
    }

    /// Cuts node `i` off from the other nodes (both ways) while it keeps
    /// serving its clients: no replication, acks or federation cross the
    /// cut, and each side sees the other with priority 10 in HELLO.
    pub fn partition(&self, i: usize) {
        self.bus.set_cut(i, true);
    }

    /// Undoes [`partition`](Self::partition).
    pub fn heal(&self, i: usize) {
        self.bus.set_cut(i, false);
    }

    /// Hangs node `i` as if its process were stopped (`SIGSTOP`): its port
    /// still accepts connections, but it reads no command and sends no
    /// reply, not even to a `GETJOB` already blocked; the other nodes see
    /// it failing (priority 10 in HELLO) and stop replicating to it.
    /// [`resume`](Self::resume) lets it go on with what its clients sent
    /// meanwhile.
    ///
    /// Unlike a real cluster, which flags a silent node after its node
    /// timeout, the other nodes see the hang at once (and messages to the
    /// hung node are dropped); [`freeze`](Self::freeze) is the faithful
    /// model. The node itself behaves as a frozen one: no command, timer or
    /// cluster message is run until it resumes.
    pub fn hang(&self, i: usize) {
        self.bus.set_hung(i, true);
        tracing::info!(node = i, "cluster node hung");
    }

    /// Undoes [`hang`](Self::hang).
    pub fn resume(&self, i: usize) {
        self.bus.set_hung(i, false);
        tracing::info!(node = i, "cluster node resumed");
    }

    /// Freezes node `i` as a real Disque node under `SIGSTOP`: its port
    /// still accepts connections, but it runs nothing — it reads no
    /// command, sends no reply, runs no timer and handles no message from
    /// the other nodes (they are held, as its socket buffers would hold
    /// them) and sends none.
    ///
    /// Unlike [`hang`](Self::hang), the other nodes do not learn of it at
    /// once: until the cluster's node timeout
    /// ([`ServerConfig::with_cluster_node_timeout`], default 15 s) passed
    /// they still list it with priority 1 in HELLO and still pick it as a
    /// replica, so a synchronous ADDJOB on a healthy node that picked it
    /// waits for its GOTJOB and, after the replication retry interval
    /// ([`ServerConfig::with_cluster_repl_retry`], 50–150 ms by default),
    /// replicates to another node instead (or waits until its own timeout
    /// when no other node is left). After the node timeout they flag it
    /// failing (priority 10) and stop picking it.
    ///
    /// [`thaw`](Self::thaw) lets it go on: it handles what its clients and
    /// the other nodes sent meanwhile, in order, and the others see it
    /// healthy again at once. Freezing a frozen node does nothing.
    pub fn freeze(&self, i: usize) {
        self.bus.set_frozen(i, true);
        tracing::info!(node = i, "cluster node frozen");
    }

    /// Undoes [`freeze`](Self::freeze).
    pub fn thaw(&self, i: usize) {
        self.bus.set_frozen(i, false);
        tracing::info!(node = i, "cluster node thawed");
    }

    /// Stops every node and waits for all their tasks.
    pub async fn shutdown(self) {
        let servers: Vec<EmbeddedDisque> = self.running.lock().await.drain(..).flatten().collect();
        for (i, _) in self.nodes.iter().enumerate() {
            self.bus.set_down(i);
        }
        for s in servers {
            s.shutdown().await;
        }
    }
}

/// The bus task of one node: handles incoming messages and runs the
/// periodic cluster housekeeping until `token` is cancelled.
pub(crate) async fn run(
    node: Arc<Node>,
    mut rx: UnboundedReceiver<Envelope>,
    token: CancellationToken,
) {
    let mut tick = tokio::time::interval(CLUSTER_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = token.cancelled() => return,
            env = rx.recv() => {
                let Some(env) = env else { return };
                if !node.wait_resumed(token.cancelled()).await {
                    return;
                }
                let mut store = node.store();
                let now = now();
                store.handle(env, now);
                // Drain what is already there under the same lock.
                for _ in 0..256 {
                    match rx.try_recv() {
                        Ok(env) => store.handle(env, now),
                        Err(_) => break,
                    }
                }
            }
            _ = tick.tick() => {
                if !node.wait_resumed(token.cancelled()).await {
                    return;
                }
                let mut store = node.store();
                let now = now();
                store.replication_tick(now);
                store.federation_tick();
            }
        }
    }
}

impl crate::state::Store {
    /// Applies one message from another node.
    fn handle(&mut self, env: Envelope, now: u64) {
        let Envelope { from, msg } = env;
        match msg {
            Msg::ReplJob(data) => self.on_repljob(from, *data),
            Msg::GotJob(id) => self.on_gotjob(from, id, now),
            Msg::SetAck(id) => self.on_setack(from, id),
            Msg::GotAck(id) => self.on_gotack(from, id),
            Msg::DelJob(id) => {
                self.delete_job(&id);
            }
            Msg::Queued {
                id,
                nacks,
                deliveries,
            } => self.on_queued(from, id, nacks, deliveries, now),
            Msg::WillQueue(id) => self.on_willqueue(from, id),
            Msg::Working(id) => self.on_working(id, now),
            Msg::QueueJob(id) => self.on_queuejob(id, now),
            Msg::NeedJobs { queue, count } => self.on_needjobs(from, &queue, count, now),
            Msg::YourJobs(jobs) => self.on_yourjobs(from, jobs, now),
            Msg::Pause {
                queue,
                pin,
                pout,
                update,
            } => {
                self.apply_pause(&queue, pin, pout, update, now);
            }
        }
    }
}
