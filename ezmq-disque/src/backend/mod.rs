//! `DisqueBackend`: nodes, routing, failover and the Disque commands the
//! SPI implementation ([`crate::spi`]) is built from.

mod membership;

use std::cmp::Reverse;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, RwLock};
use std::time::Duration;

use ezmq_core::{Error, JobId, Result, Topic};
use redis::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::claim_set::ClaimMembers;
use crate::config::DisqueConfig;
use crate::error::DisqueError;
use crate::fan_out::FanOutState;
use crate::job_store::ScanBoard;
use crate::node::{affinity_score, Node};

/// In-flight deliveries remembered for routing `ACKJOB`/`NACK`/`WORKING`
/// back to the node that delivered the job; cleared when it grows past this
/// (routing then falls back to the job id's node prefix).
const MAX_TRACKED_DELIVERIES: usize = 65_536;

/// An immutable node list: the table itself (swapped whole on refresh, so
/// reading it is one `Arc` clone, not a copy per command) or a candidate
/// order computed from it.
type Nodes = Arc<[Arc<Node>]>;

/// The Disque backend: a multi-node aware connection set.
///
/// * Non-blocking commands are pipelined over one shared connection per
///   node (`mux.rs`).
/// * Blocking `GETJOB`s run on dedicated connections from a small per-node
///   pool, one per concurrently running fetch.
/// * The node table comes from `HELLO` and is refreshed in the background
///   every [`DisqueConfig::refresh_interval`]; connection errors and
///   `-LEAVING` fail over to the next node with backoff.
/// * Topics are routed by rendezvous hashing over the node ids, so every
///   client sends a topic's jobs and fetches to the same node.
///
/// Most code uses it through a [`Client`](ezmq_core::Client) from
/// [`connect`](crate::connect). Clones share the connections; the last one
/// dropped stops the background refresher.
///
/// ```no_run
/// # async fn demo() -> ezmq_core::Result<()> {
/// use ezmq_core::{Client, ClientConfig};
/// use ezmq_disque::{DisqueBackend, DisqueConfig};
///
/// let backend = DisqueBackend::connect(DisqueConfig::default()).await?;
/// let client = Client::new(backend, ClientConfig::default());
/// # let _ = client; Ok(()) }
/// ```
#[derive(Clone)]
pub struct DisqueBackend {
    pub(crate) shared: Arc<Shared>,
    /// Cancels the refresher once the last clone is dropped.
    _stop_on_drop: Arc<DropGuard>,
}

pub(crate) struct Shared {
    pub(crate) config: DisqueConfig,
    /// Known nodes sorted by id.
    pub(crate) nodes: RwLock<Nodes>,
    /// Job id -> node that delivered it.
    pub(crate) delivered: StdMutex<HashMap<JobId, Arc<Node>>>,
    pub(crate) closed: AtomicBool,
    pub(crate) cancel: CancellationToken,
    pub(crate) refresher: StdMutex<Option<JoinHandle<()>>>,
    /// State of the fan-out (broadcast) implementation.
    pub(crate) fan_out: FanOutState,
    /// The node set exclusive claims are counted over.
    pub(crate) claims: ClaimMembers,
    /// The job store's scans in flight, by topic.
    pub(crate) job_scans: ScanBoard,
}

impl fmt::Debug for DisqueBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DisqueBackend")
            .field("seeds", &self.shared.config.seeds)
            .field("nodes", &self.shared.node_list())
            .field("closed", &self.shared.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl DisqueBackend {
    /// Connects to the first reachable seed, learns the cluster with
    /// `HELLO` and starts the background node-table refresher.
    ///
    /// Fails with [`Error::Connect`] naming every seed when none answers,
    /// and with [`Error::InvalidOption`] for a bad configuration.
    ///
    /// ```no_run
    /// # async fn demo() -> ezmq_core::Result<()> {
    /// use ezmq_disque::{DisqueBackend, DisqueConfig};
    ///
    /// let backend = DisqueBackend::connect(
    ///     DisqueConfig::default().with_seeds(["10.0.0.1:7711", "10.0.0.2:7711"]),
    /// ).await?;
    /// # let _ = backend; Ok(()) }
    /// ```
    pub async fn connect(config: DisqueConfig) -> Result<Self> {
        config.validate()?;
        let shared = Arc::new(Shared::new(config));
        if let Err(last) = shared.refresh_from_seeds().await {
            // Returned, not logged: the caller decides what to say.
            return Err(crate::connect_failure::connect_error(&shared.config.seeds, last).await);
        }
        tracing::info!(nodes = ?shared.node_list(), "connected to Disque");
        let task = tokio::spawn(membership::refresh_loop(Arc::clone(&shared)));
        if let Ok(mut slot) = shared.refresher.lock() {
            *slot = Some(task);
        }
        let stop = shared.cancel.clone().drop_guard();
        Ok(DisqueBackend {
            shared,
            _stop_on_drop: Arc::new(stop),
        })
    }

    /// State of the fan-out implementation.
    pub(crate) fn fan_out_state(&self) -> &FanOutState {
        &self.shared.fan_out
    }

    /// The configuration in use.
    pub fn config(&self) -> &DisqueConfig {
        &self.shared.config
    }

    /// The known nodes as `(id, address, priority)`, sorted by id.
    ///
    /// ```no_run
    /// # async fn demo(backend: ezmq_disque::DisqueBackend) {
    /// for (id, addr, priority) in backend.nodes() {
    ///     println!("{id} at {addr} (priority {priority})");
    /// }
    /// # }
    /// ```
    pub fn nodes(&self) -> Vec<(String, String, u32)> {
        self.shared.node_list()
    }

    /// Refreshes the node table now (it is also refreshed every
    /// [`DisqueConfig::refresh_interval`]).
    pub async fn refresh_nodes(&self) -> Result<()> {
        self.ensure_open()?;
        self.shared.refresh().await.map_err(Into::into)
    }

    pub(crate) fn ensure_open(&self) -> Result<()> {
        if self.shared.closed.load(Ordering::Acquire) {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }

    /// The node a job came from, then the node its id names, then the rest
    /// by priority.
    pub(crate) fn route_job(&self, id: &JobId) -> Vec<Arc<Node>> {
        let mut nodes = self.shared.by_priority().to_vec();
        let delivered = self
            .shared
            .delivered
            .lock()
            .ok()
            .and_then(|map| map.get(id).cloned());
        let prefix = id
            .as_str()
            .strip_prefix("D-")
            .and_then(|rest| rest.get(..8));
        if let Some(prefix) = prefix {
            if let Some(pos) = nodes.iter().position(|n| n.info.id.starts_with(prefix)) {
                let node = nodes.remove(pos);
                nodes.insert(0, node);
            }
        }
        if let Some(node) = delivered {
            nodes.retain(|n| !Arc::ptr_eq(n, &node));
            nodes.insert(0, node);
        }
        nodes
    }

    pub(crate) fn forget_delivery(&self, id: &JobId) {
        if let Ok(mut map) = self.shared.delivered.lock() {
            map.remove(id);
        }
    }

    /// Runs a job command (`ACKJOB`, `NACK`, `WORKING`) routed by job.
    pub(crate) async fn job_command(&self, name: &'static str, id: &JobId) -> Result<Value> {
        self.ensure_open()?;
        let timeout = self.shared.config.command_timeout;
        let result = self
            .shared
            .run(self.route_job(id), |node| async move {
                let mut cmd = redis::cmd(name);
                cmd.arg(id.as_str());
                node.query(name, &cmd, timeout).await
            })
            .await?;
        Ok(result)
    }
}

impl Shared {
    /// State for `config` with no node known yet.
    fn new(config: DisqueConfig) -> Shared {
        Shared {
            config,
            nodes: RwLock::new(Arc::from(Vec::new())),
            delivered: StdMutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            cancel: CancellationToken::new(),
            refresher: StdMutex::new(None),
            fan_out: FanOutState::default(),
            claims: ClaimMembers::default(),
            job_scans: ScanBoard::default(),
        }
    }

    fn node_list(&self) -> Vec<(String, String, u32)> {
        self.snapshot()
            .iter()
            .map(|n| (n.info.id.clone(), n.info.addr.clone(), n.priority()))
            .collect()
    }

    pub(crate) fn snapshot(&self) -> Nodes {
        self.nodes
            .read()
            .map(|n| Arc::clone(&n))
            .unwrap_or_else(|_| Arc::from(Vec::new()))
    }

    /// The table sorted by `key`; a single node is returned as it is
    /// (no copy: the common standalone case, on every command).
    fn sorted_by<K: Ord>(&self, key: impl FnMut(&Arc<Node>) -> K) -> Nodes {
        sort_nodes(self.snapshot(), key)
    }

    /// Healthy first, then lower priority, then lower id.
    pub(crate) fn by_priority(&self) -> Nodes {
        self.sorted_by(|n| (n.is_down(), n.priority()))
    }

    /// The topic's rendezvous order: every client computes the same order
    /// from the same node table, so producers and consumers of a topic meet
    /// on one node; a node that fails or leaves moves only its own topics.
    pub(crate) fn by_affinity(&self, topic: &Topic) -> Nodes {
        affinity_order(self.snapshot(), topic)
    }

    /// Runs `op` on the first candidate; on a connection error or
    /// `-LEAVING` waits (backoff) and moves on to the next, up to
    /// `max_attempts` in all (cycling when there are fewer nodes).
    pub(crate) async fn run<T, C, F, Fut>(&self, candidates: C, op: F) -> Result<T, DisqueError>
    where
        C: AsRef<[Arc<Node>]>,
        F: Fn(Arc<Node>) -> Fut,
        Fut: Future<Output = Result<T, DisqueError>>,
    {
        self.run_from(candidates.as_ref(), None, op).await
    }

    /// [`Shared::run`], optionally after a first attempt on `candidates[0]`
    /// that the caller made itself and that failed with `first_error`
    /// (the push fast path): the failover then goes on exactly as if `run`
    /// had made that attempt.
    pub(crate) async fn run_from<T, F, Fut>(
        &self,
        candidates: &[Arc<Node>],
        first_error: Option<DisqueError>,
        op: F,
    ) -> Result<T, DisqueError>
    where
        F: Fn(Arc<Node>) -> Fut,
        Fut: Future<Output = Result<T, DisqueError>>,
    {
        if candidates.is_empty() {
            return Err(first_error.unwrap_or(DisqueError::NoNodes));
        }
        let attempts = self.config.max_attempts.max(1) as usize;
        let mut attempt = 0;
        let mut failed = first_error;
        loop {
            if let Some(e) = failed.take() {
                if !(e.is_failover() && attempt + 1 < attempts) {
                    return Err(e);
                }
                let node = &candidates[attempt % candidates.len()];
                let next = &candidates[(attempt + 1) % candidates.len()];
                // Straight on to another node that is up; a backoff only
                // before trying a node again (or one known to be down).
                let wait = if Arc::ptr_eq(node, next) || next.is_down() {
                    backoff(self.config.retry_backoff, attempt)
                } else {
                    Duration::ZERO
                };
                if node.is_down() {
                    // Said once, when the node was marked down.
                    tracing::debug!(node = %node.addr(), next = %next.addr(), cause = %e, ?wait, "failing over");
                } else {
                    tracing::warn!(
                        node = %node.addr(),
                        next = %next.addr(),
                        cause = %e,
                        ?wait,
                        "Disque command failed, failing over"
                    );
                }
                if !wait.is_zero() {
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = self.cancel.cancelled() => return Err(e),
                    }
                }
                attempt += 1;
            }
            let node = Arc::clone(&candidates[attempt % candidates.len()]);
            match op(node).await {
                Ok(v) => return Ok(v),
                Err(e) => failed = Some(e),
            }
        }
    }

    pub(crate) fn remember_delivery(&self, id: &JobId, node: &Arc<Node>) {
        if let Ok(mut map) = self.delivered.lock() {
            if map.len() >= MAX_TRACKED_DELIVERIES {
                map.clear();
            }
            map.insert(id.clone(), Arc::clone(node));
        }
    }
}

/// `nodes` sorted by `key`; a single node is returned as it is.
fn sort_nodes<K: Ord>(nodes: Nodes, key: impl FnMut(&Arc<Node>) -> K) -> Nodes {
    if nodes.len() <= 1 {
        return nodes;
    }
    let mut nodes = nodes.to_vec();
    nodes.sort_by_key(key);
    nodes.into()
}

/// `nodes` in `topic`'s rendezvous order (see [`Shared::by_affinity`]).
pub(crate) fn affinity_order(nodes: Nodes, topic: &Topic) -> Nodes {
    sort_nodes(nodes, |n| {
        (
            n.is_down(),
            n.priority(),
            Reverse(affinity_score(topic.as_str(), &n.info.id)),
        )
    })
}

fn backoff(initial: Duration, attempt: usize) -> Duration {
    let shift = u32::try_from(attempt.min(10)).unwrap_or(10);
    initial
        .saturating_mul(1 << shift)
        .min(Duration::from_secs(1))
}

/// Whole seconds, rounded up.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NodeInfo;

    #[test]
    fn backoff_grows_and_caps() {
        let b = Duration::from_millis(100);
        assert_eq!(backoff(b, 0), b);
        assert_eq!(backoff(b, 1), Duration::from_millis(200));
        assert_eq!(backoff(b, 9), Duration::from_secs(1));
    }

    fn shared_with(ids: &[&str]) -> Shared {
        let shared = Shared::new(DisqueConfig::default());
        let infos = ids
            .iter()
            .enumerate()
            .map(|(i, id)| NodeInfo {
                id: (*id).to_owned(),
                addr: format!("10.0.0.{i}:7711"),
                priority: 1,
            })
            .collect();
        shared.install(infos).unwrap();
        shared
    }

    #[tokio::test]
    async fn run_from_continues_after_the_callers_first_attempt() {
        let shared = shared_with(&["aa", "bb", "cc"]);
        let order = shared.by_priority();
        let io = |addr: &str| DisqueError::Timeout {
            command: "ADDJOB",
            addr: addr.to_owned(),
            after: Duration::ZERO,
        };
        // A failover error on the first node: the next attempt is the
        // second candidate, and attempts count the caller's.
        let tried = StdMutex::new(Vec::new());
        let got = shared
            .run_from(&order, Some(io("first")), |node| {
                tried.lock().unwrap().push(node.info.id.clone());
                async move { Ok::<_, DisqueError>(node.info.id.clone()) }
            })
            .await
            .unwrap();
        assert_eq!(got, "bb");
        assert_eq!(*tried.lock().unwrap(), ["bb"]);
        // A non-failover error is returned as it is, nothing retried.
        let err = shared
            .run_from(&order, Some(DisqueError::NoNodes), |_node| async {
                Ok::<_, DisqueError>(())
            })
            .await
            .unwrap_err();
        assert!(matches!(err, DisqueError::NoNodes));
        // Plain `run` still starts on the first candidate.
        let first = shared
            .run(order.clone(), |node| async move {
                Ok::<_, DisqueError>(node.info.id.clone())
            })
            .await
            .unwrap();
        assert_eq!(first, "aa");
    }

    fn ids(nodes: &[Arc<Node>]) -> Vec<String> {
        nodes.iter().map(|n| n.info.id.clone()).collect()
    }

    #[test]
    fn routing_is_the_same_for_every_client() {
        let a = shared_with(&["cc", "aa", "bb"]);
        let b = shared_with(&["bb", "cc", "aa"]);
        let t = Topic::new("orders").unwrap();
        assert_eq!(ids(&a.by_affinity(&t)), ids(&b.by_affinity(&t)));

        // A leaving node (worse priority) is tried last.
        let first = a.by_affinity(&t)[0].clone();
        first.set_priority(100);
        assert_eq!(ids(&a.by_affinity(&t))[2], first.info.id);
    }

    #[test]
    fn refresh_keeps_known_nodes() {
        let shared = shared_with(&["aa", "bb"]);
        let before = shared.snapshot();
        shared
            .install(vec![
                NodeInfo {
                    id: "aa".into(),
                    addr: "10.0.0.0:7711".into(),
                    priority: 10,
                },
                NodeInfo {
                    id: "dd".into(),
                    addr: "10.0.0.9:7711".into(),
                    priority: 1,
                },
            ])
            .unwrap();
        let after = shared.snapshot();
        assert!(Arc::ptr_eq(&before[0], &after[0]));
        assert_eq!(after[0].priority(), 10);
        assert_eq!(ids(&after), ["aa", "dd"]);
        assert!(shared.install(Vec::new()).is_err());
    }

    #[tokio::test]
    async fn job_commands_go_to_the_node_named_in_the_id() {
        let shared = Arc::new(shared_with(&["aaaaaaaa11", "bbbbbbbb22", "cccccccc33"]));
        let backend = DisqueBackend {
            _stop_on_drop: Arc::new(shared.cancel.clone().drop_guard()),
            shared,
        };
        let id = JobId::new("D-bbbbbbbb-xxxxxxxxxxxxxxxxxxxxxxxx-05a1");
        assert_eq!(backend.route_job(&id)[0].info.id, "bbbbbbbb22");
        let c = backend.shared.snapshot()[2].clone();
        backend.shared.remember_delivery(&id, &c);
        assert_eq!(backend.route_job(&id)[0].info.id, "cccccccc33");
        backend.forget_delivery(&id);
        assert_eq!(backend.route_job(&id)[0].info.id, "bbbbbbbb22");
    }
}
