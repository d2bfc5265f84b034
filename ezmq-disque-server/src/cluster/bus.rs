//! The in-process cluster bus: node slots, reachability (kill, partition,
//! hang, freeze) and message delivery through one unbounded channel per
//! node.

use super::messages::Msg;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

/// HELLO priority of a healthy node.
pub(crate) const PRIORITY_OK: &str = "1";
/// HELLO priority of a node that is down or cut off (Disque's `PFAIL`).
pub(crate) const PRIORITY_FAILING: &str = "10";
/// HELLO priority of a node leaving the cluster (`CLUSTER LEAVING yes`).
pub(crate) const PRIORITY_LEAVING: &str = "100";

/// A message with the bus index of its sender.
#[derive(Debug)]
pub(crate) struct Envelope {
    pub(crate) from: u16,
    pub(crate) msg: Msg,
}

/// One node slot. Its id, host and port never change (a restarted node
/// comes back with the same identity).
#[derive(Debug)]
pub(crate) struct Peer {
    pub(crate) id: String,
    pub(crate) host: String,
    pub(crate) port: u16,
    /// Inbox of the running node; `None` while it is down.
    tx: Option<UnboundedSender<Envelope>>,
    /// Cut off from every other node (it still serves its clients).
    cut: bool,
    /// `CLUSTER LEAVING yes` was set on the node (seen by every node, as
    /// Disque gossips the flag).
    leaving: bool,
    /// Hung (see [`crate::EmbeddedCluster::hang`]): it answers nothing
    /// and the others see it failing at once.
    hung: bool,
    /// Frozen since then (see [`crate::EmbeddedCluster::freeze`]): it
    /// answers nothing, messages to it are held, and the others see it
    /// failing only once the node timeout passed.
    frozen_at: Option<Instant>,
}

impl Peer {
    /// Frozen for longer than `node_timeout`: the others flag it failing.
    fn timed_out(&self, node_timeout: Duration) -> bool {
        self.frozen_at
            .is_some_and(|at| at.elapsed() >= node_timeout)
    }
}

/// Cluster-wide timing settings (from [`crate::ServerConfig`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BusTiming {
    /// A node silent for this long is flagged failing by the others
    /// (Disque's `cluster-node-timeout`).
    pub(crate) node_timeout: Duration,
    /// A synchronous ADDJOB whose replicas have not all answered asks one
    /// more node at the first cluster tick at least this long after the
    /// last node was added (Disque's `DELAYED_JOB_ADD_NODE_MIN_PERIOD`).
    pub(crate) repl_retry: Duration,
}

/// The cluster bus shared by all nodes of an [`crate::EmbeddedCluster`].
#[derive(Debug)]
pub(crate) struct Bus {
    peers: RwLock<Vec<Peer>>,
    /// Per slot: true while the node is hung or frozen. Its connections,
    /// its timers and its bus task wait on it.
    paused: Vec<watch::Sender<bool>>,
    timing: BusTiming,
}

impl Bus {
    /// A bus with the given `(id, host, port)` slots, all down.
    pub(crate) fn new(slots: Vec<(String, String, u16)>, timing: BusTiming) -> Bus {
        let paused = slots.iter().map(|_| watch::Sender::new(false)).collect();
        let peers = slots
            .into_iter()
            .map(|(id, host, port)| Peer {
                id,
                host,
                port,
                tx: None,
                cut: false,
                leaving: false,
                hung: false,
                frozen_at: None,
            })
            .collect();
        Bus {
            peers: RwLock::new(peers),
            paused,
            timing,
        }
    }

    /// The cluster's timing settings.
    pub(crate) fn timing(&self) -> BusTiming {
        self.timing
    }

    fn read(&self) -> RwLockReadGuard<'_, Vec<Peer>> {
        self.peers.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Vec<Peer>> {
        self.peers.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of nodes in the cluster (up or not).
    pub(crate) fn size(&self) -> usize {
        self.read().len()
    }

    /// The node id of slot `i`.
    pub(crate) fn id(&self, i: u16) -> String {
        self.read()[usize::from(i)].id.clone()
    }

    /// Marks slot `i` up with the inbox of its new incarnation.
    pub(crate) fn set_up(&self, i: usize, tx: UnboundedSender<Envelope>) {
        let mut peers = self.write();
        peers[i].tx = Some(tx);
        peers[i].leaving = false;
    }

    /// Sets or clears the leaving flag of slot `i`.
    pub(crate) fn set_leaving(&self, i: u16, leaving: bool) {
        if let Some(p) = self.write().get_mut(usize::from(i)) {
            p.leaving = leaving;
        }
    }

    /// Marks slot `i` down (killed): its inbox is dropped, and a freeze or
    /// hang ends (a restarted process runs).
    pub(crate) fn set_down(&self, i: usize) {
        let mut peers = self.write();
        let p = &mut peers[i];
        p.tx = None;
        p.hung = false;
        p.frozen_at = None;
        self.update_paused(&peers, i);
    }

    /// Hangs slot `i` (or resumes it): see [`crate::EmbeddedCluster::hang`].
    pub(crate) fn set_hung(&self, i: usize, hung: bool) {
        let mut peers = self.write();
        peers[i].hung = hung;
        self.update_paused(&peers, i);
    }

    /// Freezes slot `i` (or thaws it): see
    /// [`crate::EmbeddedCluster::freeze`]. Freezing a frozen slot keeps
    /// its first freeze time.
    pub(crate) fn set_frozen(&self, i: usize, frozen: bool) {
        let mut peers = self.write();
        let p = &mut peers[i];
        p.frozen_at = match (frozen, p.frozen_at) {
            (true, Some(at)) => Some(at),
            (true, None) => Some(Instant::now()),
            (false, _) => None,
        };
        self.update_paused(&peers, i);
    }

    fn update_paused(&self, peers: &[Peer], i: usize) {
        let paused = peers[i].hung || peers[i].frozen_at.is_some();
        if let Some(flag) = self.paused.get(i) {
            flag.send_replace(paused);
        }
    }

    /// True while slot `i` is hung or frozen (it runs nothing).
    pub(crate) fn is_paused(&self, i: u16) -> bool {
        self.paused
            .get(usize::from(i))
            .is_some_and(|flag| *flag.borrow())
    }

    /// Completes once slot `i` is neither hung nor frozen (at once when it
    /// is not).
    pub(crate) async fn resumed(&self, i: u16) {
        if let Some(flag) = self.paused.get(usize::from(i)) {
            let mut rx = flag.subscribe();
            // The sender lives as long as the bus, so this only ends when
            // the flag is false.
            let _ = rx.wait_for(|paused| !*paused).await;
        }
    }

    /// Cuts slot `i` off from the others (or heals it).
    pub(crate) fn set_cut(&self, i: usize, cut: bool) {
        self.write()[i].cut = cut;
    }

    /// True when slot `i` runs (killed nodes lost all their state).
    pub(crate) fn is_up(&self, i: u16) -> bool {
        self.read()
            .get(usize::from(i))
            .is_some_and(|p| p.tx.is_some())
    }

    /// True when messages between `a` and `b` get through: both run, and
    /// neither is cut off or hung. A frozen node's messages get through
    /// (it handles them once thawed).
    fn link_carries(peers: &[Peer], a: u16, b: u16) -> bool {
        let (Some(pa), Some(pb)) = (peers.get(usize::from(a)), peers.get(usize::from(b))) else {
            return false;
        };
        a == b || (pa.tx.is_some() && pb.tx.is_some() && !pa.cut && !pb.cut && !pa.hung && !pb.hung)
    }

    /// True when `a` and `b` see each other healthy: the link carries
    /// messages and neither was frozen for longer than the node timeout.
    fn link_ok(&self, peers: &[Peer], a: u16, b: u16) -> bool {
        if a == b {
            return peers.get(usize::from(a)).is_some();
        }
        Self::link_carries(peers, a, b)
            && !peers[usize::from(a)].timed_out(self.timing.node_timeout)
            && !peers[usize::from(b)].timed_out(self.timing.node_timeout)
    }

    /// Slots other than `from` that `from` can talk to right now.
    pub(crate) fn reachable_peers(&self, from: u16) -> Vec<u16> {
        let peers = self.read();
        (0..peers.len() as u16)
            .filter(|&j| j != from && self.link_ok(&peers, from, j))
            .collect()
    }

    /// Reachable slots other than `from` that are not leaving: the nodes a
    /// new job may be replicated to.
    pub(crate) fn replication_peers(&self, from: u16) -> Vec<u16> {
        let peers = self.read();
        (0..peers.len() as u16)
            .filter(|&j| {
                j != from && self.link_ok(&peers, from, j) && !peers[usize::from(j)].leaving
            })
            .collect()
    }

    /// Delivers `msg` from `from` to `to` unless the link is down. A
    /// frozen node gets its messages (they wait in its inbox), also after
    /// the node timeout, as a stopped process's socket buffers hold them.
    pub(crate) fn send(&self, from: u16, to: u16, msg: Msg) -> bool {
        if from == to {
            return false;
        }
        let peers = self.read();
        if !Self::link_carries(&peers, from, to) {
            return false;
        }
        match &peers[usize::from(to)].tx {
            Some(tx) => tx.send(Envelope { from, msg }).is_ok(),
            None => false,
        }
    }

    /// `(id, host, port, priority)` of every node as seen by `me`, own
    /// entry first.
    pub(crate) fn hello(&self, me: u16) -> Vec<(String, String, u16, &'static str)> {
        let peers = self.read();
        let mut order: Vec<u16> = vec![me];
        order.extend((0..peers.len() as u16).filter(|&j| j != me));
        order
            .into_iter()
            .map(|j| {
                let p = &peers[usize::from(j)];
                let prio = if !self.link_ok(&peers, me, j) {
                    PRIORITY_FAILING
                } else if p.leaving {
                    PRIORITY_LEAVING
                } else {
                    PRIORITY_OK
                };
                (p.id.clone(), p.host.clone(), p.port, prio)
            })
            .collect()
    }
}

/// A node's handle on the bus.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) bus: std::sync::Arc<Bus>,
    pub(crate) me: u16,
}

impl Link {
    /// Sends one message.
    pub(crate) fn send(&self, to: u16, msg: Msg) -> bool {
        self.bus.send(self.me, to, msg)
    }

    /// Sends a message built by `make` to every node of `nodes` but this one.
    pub(crate) fn send_each(&self, nodes: &[u16], make: impl Fn() -> Msg) {
        for &n in nodes {
            if n != self.me {
                self.bus.send(self.me, n, make());
            }
        }
    }

    /// Sends a message built by `make` to every reachable node.
    pub(crate) fn broadcast(&self, make: impl Fn() -> Msg) {
        for n in self.bus.reachable_peers(self.me) {
            self.bus.send(self.me, n, make());
        }
    }
}
