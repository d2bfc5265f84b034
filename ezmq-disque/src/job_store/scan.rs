//! Reading a topic's jobs: `JSCAN <cursor> COUNT n QUEUE <topic> REPLY all`
//! on every node, paged, each page beside a `TIME` of the same node; and
//! `SHOW <id>` of one job on every node. Concurrent scans of a topic are
//! coalesced: a caller joins the next scan to start (never one already
//! running, which may have passed its job), so a burst of calls costs two
//! scans, not one each.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex as StdMutex, Weak};

use ezmq_core::{JobId, Result, Topic};
use futures::future::{BoxFuture, FutureExt, Shared};
use redis::Value;
use tokio::time::Instant;

use super::copy::{parse_time, Clock, Copy};
use super::view::{group, Found};
use crate::backend::Shared as BackendShared;
use crate::commands::abbreviate;
use crate::error::DisqueError;
use crate::node::{as_u64, Node};

/// Jobs asked for per `JSCAN` page (Disque examines up to ten times as
/// many per call).
const PAGE: u64 = 1000;

/// A topic's jobs by ezmq id, as a scan found them.
pub(super) type Jobs = BTreeMap<JobId, Found>;
/// A scan's result as every caller that shared it gets it (grouped once).
type ScanResult = std::result::Result<Arc<Jobs>, Arc<DisqueError>>;
type SharedScan = Shared<BoxFuture<'static, ScanResult>>;

/// The scans of each topic: the one callers may still join, and a gate
/// that runs one scan of a topic at a time.
#[derive(Default)]
pub(crate) struct ScanBoard {
    topics: StdMutex<HashMap<Topic, Slot>>,
    tickets: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Slot {
    gate: Arc<tokio::sync::Mutex<()>>,
    joinable: Option<(u64, SharedScan)>,
}

impl ScanBoard {
    /// The scan of `topic` to join: one that has not started, else a new
    /// one (which starts once the running one ends).
    fn join(&self, shared: &Arc<BackendShared>, topic: &Topic) -> SharedScan {
        let Ok(mut topics) = self.topics.lock() else {
            return scan_future(Arc::downgrade(shared), topic.clone(), None).shared();
        };
        let slot = topics.entry(topic.clone()).or_default();
        if let Some((_, scan)) = &slot.joinable {
            return scan.clone();
        }
        let ticket = self
            .tickets
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let gate = Arc::clone(&slot.gate);
        let scan =
            scan_future(Arc::downgrade(shared), topic.clone(), Some((ticket, gate))).shared();
        slot.joinable = Some((ticket, scan.clone()));
        scan
    }

    /// The scan with `ticket` starts: nobody may join it any more.
    fn started(&self, topic: &Topic, ticket: u64) {
        if let Ok(mut topics) = self.topics.lock() {
            if let Some(slot) = topics.get_mut(topic) {
                if slot.joinable.as_ref().is_some_and(|(t, _)| *t == ticket) {
                    slot.joinable = None;
                }
            }
        }
    }

    /// A scan ended: forget the topic when nothing waits on it.
    fn ended(&self, topic: &Topic) {
        if let Ok(mut topics) = self.topics.lock() {
            let idle = topics
                .get(topic)
                .is_some_and(|slot| slot.joinable.is_none() && Arc::strong_count(&slot.gate) == 1);
            if idle {
                topics.remove(topic);
            }
        }
    }
}

/// One scan of `topic`, after its turn at `gate` (`None`: alone). Holds
/// the backend weakly while it waits, so a scan nobody polls keeps
/// nothing alive.
fn scan_future(
    shared: Weak<BackendShared>,
    topic: Topic,
    turn: Option<(u64, Arc<tokio::sync::Mutex<()>>)>,
) -> BoxFuture<'static, ScanResult> {
    async move {
        let guard = match &turn {
            Some((_, gate)) => Some(gate.lock().await),
            None => None,
        };
        // Gone only once every caller dropped its backend (none polls).
        let shared = shared.upgrade().ok_or(Arc::new(DisqueError::NoNodes))?;
        if let Some((ticket, _)) = &turn {
            shared.job_scans.started(&topic, *ticket);
        }
        let result = scan_all(&shared, &topic).await;
        drop(guard);
        drop(turn);
        shared.job_scans.ended(&topic);
        result
            .map(|copies| Arc::new(group(&copies, &topic)))
            .map_err(Arc::new)
    }
    .boxed()
}

/// Every copy of every job of `topic` on every node; fails when a node
/// cannot be read (the answer would be partial).
async fn scan_all(
    shared: &BackendShared,
    topic: &Topic,
) -> std::result::Result<Vec<Copy>, DisqueError> {
    let nodes = shared.snapshot();
    if nodes.is_empty() {
        return Err(DisqueError::NoNodes);
    }
    let reads = nodes.iter().map(|node| scan_node(shared, node, topic));
    let mut copies = Vec::new();
    let mut failed = None;
    let mut read_any = false;
    for result in futures::future::join_all(reads).await {
        match result {
            Ok(found) => {
                read_any = true;
                copies.extend(found);
            }
            Err(e) => failed = Some(e),
        }
    }
    match failed {
        Some(e) if read_any => Err(DisqueError::Partial(Box::new(e))),
        Some(e) => Err(e),
        None => Ok(copies),
    }
}

/// One node's copies of `topic`'s jobs, page by page.
async fn scan_node(
    shared: &BackendShared,
    node: &Arc<Node>,
    topic: &Topic,
) -> std::result::Result<Vec<Copy>, DisqueError> {
    let timeout = shared.config.command_timeout;
    let mut by_id: HashMap<JobId, Copy> = HashMap::new();
    let mut cursor = 0u64;
    loop {
        let mut cmd = redis::cmd("JSCAN");
        cmd.arg(cursor)
            .arg("COUNT")
            .arg(PAGE)
            .arg("QUEUE")
            .arg(topic.as_str())
            .arg("REPLY")
            .arg("all");
        let (clock, value) = timed(node, "JSCAN", &cmd, timeout).await?;
        let bad = || DisqueError::UnexpectedReply {
            command: "JSCAN",
            addr: node.addr().to_owned(),
            reply: abbreviate(&value),
        };
        let Value::Array(parts) = &value else {
            return Err(bad());
        };
        let (Some(next), Some(Value::Array(items))) =
            (parts.first().and_then(as_u64), parts.get(1))
        else {
            return Err(bad());
        };
        // A job listed twice (JSCAN may) is kept once.
        for copy in items
            .iter()
            .filter_map(|item| Copy::parse(node, item, clock))
        {
            by_id.insert(copy.id.clone(), copy);
        }
        if next == 0 {
            return Ok(by_id.into_values().collect());
        }
        cursor = next;
    }
}

/// `TIME` and `cmd` on `node`, sent together: the reply, and the node's
/// clock and the instant they were sent.
pub(super) async fn timed(
    node: &Node,
    name: &'static str,
    cmd: &redis::Cmd,
    timeout: std::time::Duration,
) -> std::result::Result<(Clock, Value), DisqueError> {
    let sent = Instant::now();
    let time = redis::cmd("TIME");
    let (time, value) = futures::future::join(
        node.query("TIME", &time, timeout),
        node.query(name, cmd, timeout),
    )
    .await;
    let time = time?;
    let server_ms = parse_time(&time).ok_or_else(|| DisqueError::UnexpectedReply {
        command: "TIME",
        addr: node.addr().to_owned(),
        reply: abbreviate(&time),
    })?;
    Ok((Clock { server_ms, sent }, value?))
}

impl crate::backend::DisqueBackend {
    /// Every job of `topic`, from a scan that started after this call
    /// (shared with concurrent callers).
    pub(super) async fn scan_topic(&self, topic: &Topic) -> Result<Arc<Jobs>> {
        self.ensure_open()?;
        let scan = self.shared.job_scans.join(&self.shared, topic);
        scan.await.map_err(|e| DisqueError::Shared(e).into())
    }

    /// Disque job `id`'s copies now: `SHOW` on every node (a node without
    /// it answers nil). Fails when a node cannot be read.
    pub(super) async fn show_everywhere(&self, id: &JobId) -> Result<Vec<Copy>> {
        self.ensure_open()?;
        let timeout = self.shared.config.command_timeout;
        let nodes = self.shared.snapshot();
        let reads = nodes.iter().map(|node| async move {
            let mut cmd = redis::cmd("SHOW");
            cmd.arg(id.as_str());
            let (clock, value) = timed(node, "SHOW", &cmd, timeout).await?;
            Ok::<_, DisqueError>(Copy::parse(node, &value, clock))
        });
        let mut copies = Vec::new();
        for result in futures::future::join_all(reads).await {
            copies.extend(result?);
        }
        Ok(copies)
    }
}
