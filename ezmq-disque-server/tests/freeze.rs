//! `EmbeddedCluster::freeze` / `thaw` over raw RESP: a node stopped like a
//! real Disque node under `SIGSTOP`. The others keep picking it as a
//! replica until the node timeout, a synchronous ADDJOB that picked it
//! waits the replication retry interval and replicates elsewhere, ASYNC
//! answers at once, replies stay in order per connection, and the frozen
//! node answers what it was sent once thawed.

mod support;

use ezmq_disque_server::{EmbeddedCluster, ServerConfig};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::queue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a test waits to see that nothing is answered.
const SILENCE: Duration = Duration::from_millis(300);
/// Bound on any reply that is expected.
const REPLY_LIMIT: Duration = Duration::from_secs(10);

/// One RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<String>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    fn text(&self) -> String {
        match self {
            Reply::Status(s) | Reply::Bulk(Some(s)) => s.clone(),
            other => panic!("expected a string, got {other:?}"),
        }
    }
}

/// Parses one reply from the start of `buf`: the reply and its length, or
/// `None` when more bytes are needed.
fn parse(buf: &[u8]) -> Option<(Reply, usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&buf[1..end]).expect("RESP line is UTF-8");
    let next = end + 2;
    match buf.first()? {
        b'+' => Some((Reply::Status(line.to_owned()), next)),
        b'-' => Some((Reply::Error(line.to_owned()), next)),
        b':' => Some((Reply::Int(line.parse().expect("integer")), next)),
        b'$' => {
            let len: i64 = line.parse().expect("bulk length");
            if len < 0 {
                return Some((Reply::Bulk(None), next));
            }
            let len = len as usize;
            let body = buf.get(next..next + len)?;
            buf.get(next + len..next + len + 2)?;
            let s = String::from_utf8_lossy(body).into_owned();
            Some((Reply::Bulk(Some(s)), next + len + 2))
        }
        b'*' => {
            let n: i64 = line.parse().expect("array length");
            if n < 0 {
                return Some((Reply::Array(None), next));
            }
            let mut at = next;
            let mut items = Vec::new();
            for _ in 0..n {
                let (item, used) = parse(&buf[at..])?;
                items.push(item);
                at += used;
            }
            Some((Reply::Array(Some(items)), at))
        }
        other => panic!("unexpected RESP type byte {other}"),
    }
}

/// A raw RESP connection: commands are written as sent (pipelining is
/// just several sends), replies are read one at a time.
struct Raw {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    async fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).await.expect("connect");
        Raw {
            stream,
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, args: &[&str]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.stream.write_all(&out).await.expect("send");
    }

    /// The next reply, or `None` when none arrives within `limit`.
    async fn reply_within(&mut self, limit: Duration) -> Option<Reply> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some((reply, used)) = parse(&self.buf) {
                self.buf.drain(..used);
                return Some(reply);
            }
            let mut chunk = [0u8; 4096];
            match tokio::time::timeout_at(deadline, self.stream.read(&mut chunk)).await {
                Err(_) => return None,
                Ok(Ok(0)) => panic!("connection closed"),
                Ok(Ok(n)) => self.buf.extend_from_slice(&chunk[..n]),
                Ok(Err(e)) => panic!("read: {e}"),
            }
        }
    }

    async fn reply(&mut self) -> Reply {
        self.reply_within(REPLY_LIMIT)
            .await
            .expect("a reply within 10 s")
    }

    async fn call(&mut self, args: &[&str]) -> Reply {
        self.send(args).await;
        self.reply().await
    }
}

/// A 3-node cluster with the given node timeout (and default retry).
async fn cluster_with(node_timeout: Duration) -> EmbeddedCluster {
    let config = ServerConfig::default()
        .with_port(0)
        .with_cluster_node_timeout(node_timeout);
    EmbeddedCluster::start_with(3, config)
        .await
        .expect("cluster")
}

/// HELLO priority of node `id` as seen through `c`.
async fn priority_of(c: &mut Raw, id: &str) -> String {
    let Reply::Array(Some(items)) = c.call(&["HELLO"]).await else {
        panic!("HELLO is an array");
    };
    items[2..]
        .iter()
        .find_map(|e| match e {
            Reply::Array(Some(f)) if f[0].text() == id => Some(f[3].text()),
            _ => None,
        })
        .expect("node listed in HELLO")
}

#[tokio::test]
async fn sync_addjob_waits_the_retry_interval_for_a_frozen_replica_then_replicates_elsewhere() {
    let cluster = cluster_with(Duration::from_secs(60)).await;
    let mut c0 = Raw::connect(cluster.node(0).addr).await;
    let mut c1 = Raw::connect(cluster.node(1).addr).await;
    cluster.freeze(2);
    let q = queue("frozen-repl");
    // Each ADDJOB picks its replica at random: node 1 answers at once,
    // node 2 never; 20 tries pick node 2 at least once but with
    // probability 2^-20.
    let mut slow = Vec::new();
    for i in 0..20 {
        let body = format!("job-{i}");
        let t0 = Instant::now();
        let reply = c0
            .call(&["ADDJOB", &q, &body, "5000", "REPLICATE", "2"])
            .await;
        let took = t0.elapsed();
        let Reply::Status(id) = reply else {
            panic!("ADDJOB {i}: {reply:?}");
        };
        if took >= Duration::from_millis(50) {
            slow.push((id, took));
        }
    }
    eprintln!("ADDJOBs that waited for the frozen node: {slow:?}");
    assert!(!slow.is_empty(), "no ADDJOB waited for the frozen node");
    for (id, took) in &slow {
        // Disque: one more node at the first 100 ms tick at least 50 ms
        // after the ADDJOB (50-150 ms); generous upper bound for load.
        assert!(*took < Duration::from_millis(600), "{id} took {took:?}");
        // ... and that node holds a copy.
        assert_ne!(c1.call(&["SHOW", id]).await, Reply::Bulk(None), "{id}");
    }
    // Still before the node timeout: the others list node 2 as healthy.
    let id2 = cluster.node(2).node_id;
    assert_eq!(priority_of(&mut c0, &id2).await, "1");
    cluster.shutdown().await;
}

#[tokio::test]
async fn replicate_all_nodes_waits_for_the_frozen_node_until_the_addjob_timeout() {
    let cluster = cluster_with(Duration::from_secs(60)).await;
    let mut c0 = Raw::connect(cluster.node(0).addr).await;
    let q = queue("frozen-all");
    cluster.freeze(2);
    // REPLICATE 3 on 3 nodes: no other node to try, so the ADDJOB waits
    // for node 2 until its own timeout, as Disque does.
    let t0 = Instant::now();
    let reply = c0.call(&["ADDJOB", &q, "x", "500", "REPLICATE", "3"]).await;
    let took = t0.elapsed();
    match &reply {
        Reply::Error(e) => assert!(e.starts_with("NOREPL Timeout"), "{e}"),
        other => panic!("expected -NOREPL, got {other:?}"),
    }
    assert!(took >= Duration::from_millis(500), "{took:?}");
    // With a long timeout it completes once node 2 is thawed and answers.
    c0.send(&["ADDJOB", &q, "y", "20000", "REPLICATE", "3"])
        .await;
    assert_eq!(c0.reply_within(SILENCE).await, None, "waits for node 2");
    cluster.thaw(2);
    let reply = c0.reply().await;
    let Reply::Status(id) = reply else {
        panic!("ADDJOB after thaw: {reply:?}");
    };
    let mut c2 = Raw::connect(cluster.node(2).addr).await;
    assert_ne!(c2.call(&["SHOW", &id]).await, Reply::Bulk(None));
    cluster.shutdown().await;
}

#[tokio::test]
async fn async_addjob_answers_at_once_with_a_frozen_replica() {
    let cluster = cluster_with(Duration::from_secs(60)).await;
    let mut c0 = Raw::connect(cluster.node(0).addr).await;
    let q = queue("frozen-async");
    cluster.freeze(2);
    for i in 0..10 {
        let t0 = Instant::now();
        let body = format!("job-{i}");
        let reply = c0
            .call(&["ADDJOB", &q, &body, "5000", "REPLICATE", "3", "ASYNC"])
            .await;
        let took = t0.elapsed();
        assert!(matches!(reply, Reply::Status(_)), "{reply:?}");
        // Real Disque: < 10 ms; generous for a loaded machine, still well
        // below what a synchronous ADDJOB waits.
        assert!(took < Duration::from_millis(100), "ASYNC took {took:?}");
    }
    assert_eq!(c0.call(&["QLEN", &q]).await, Reply::Int(10));
    cluster.shutdown().await;
}

#[tokio::test]
async fn replies_on_one_connection_stay_in_order_behind_a_waiting_addjob() {
    let cluster = cluster_with(Duration::from_secs(60)).await;
    let mut c0 = Raw::connect(cluster.node(0).addr).await;
    let q = queue("frozen-order");
    cluster.freeze(2);
    // Pipelined: an ADDJOB that waits for node 2, then a PING and a QLEN.
    let t0 = Instant::now();
    c0.send(&["ADDJOB", &q, "x", "400", "REPLICATE", "3"]).await;
    c0.send(&["PING"]).await;
    c0.send(&["QLEN", &q]).await;
    let first = c0.reply().await;
    let took = t0.elapsed();
    assert!(
        matches!(&first, Reply::Error(e) if e.starts_with("NOREPL")),
        "{first:?}"
    );
    assert!(took >= Duration::from_millis(400), "{took:?}");
    // The PING was answered only after the ADDJOB, and the QLEN after it.
    assert_eq!(c0.reply().await, Reply::Status("PONG".into()));
    assert_eq!(c0.reply().await, Reply::Int(0));
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_frozen_node_accepts_and_answers_what_it_was_sent_once_thawed() {
    let cluster = cluster_with(Duration::from_secs(60)).await;
    let mut early = Raw::connect(cluster.node(2).addr).await;
    cluster.freeze(2);
    // A connection opened before and one opened during the freeze.
    let mut late = Raw::connect(cluster.node(2).addr).await;
    let q = queue("frozen-thaw");
    early
        .send(&["ADDJOB", &q, "a", "0", "REPLICATE", "1"])
        .await;
    early
        .send(&["ADDJOB", &q, "b", "0", "REPLICATE", "1"])
        .await;
    early.send(&["QLEN", &q]).await;
    late.send(&["PING"]).await;
    assert_eq!(early.reply_within(SILENCE).await, None, "frozen: no reply");
    assert_eq!(late.reply_within(SILENCE).await, None, "frozen: no reply");
    cluster.thaw(2);
    assert!(matches!(early.reply().await, Reply::Status(_)));
    assert!(matches!(early.reply().await, Reply::Status(_)));
    assert_eq!(early.reply().await, Reply::Int(2));
    assert_eq!(late.reply().await, Reply::Status("PONG".into()));
    cluster.shutdown().await;
}

#[tokio::test]
async fn hello_flags_a_frozen_node_only_after_the_node_timeout() {
    let node_timeout = Duration::from_millis(800);
    let cluster = cluster_with(node_timeout).await;
    let mut c0 = Raw::connect(cluster.node(0).addr).await;
    let mut c1 = Raw::connect(cluster.node(1).addr).await;
    let id2 = cluster.node(2).node_id;
    let q = queue("frozen-hello");
    let t0 = Instant::now();
    cluster.freeze(2);
    assert_eq!(priority_of(&mut c0, &id2).await, "1");
    assert_eq!(priority_of(&mut c1, &id2).await, "1");
    let mut flagged = None;
    while t0.elapsed() < node_timeout + Duration::from_secs(5) {
        if priority_of(&mut c0, &id2).await == "10" {
            flagged = Some(t0.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let flagged = flagged.expect("node 2 flagged failing");
    assert!(flagged >= node_timeout, "flagged after {flagged:?}");
    assert_eq!(priority_of(&mut c1, &id2).await, "10");
    // Failing: no longer picked, so REPLICATE 3 is refused at once.
    let reply = c0
        .call(&["ADDJOB", &q, "x", "5000", "REPLICATE", "3"])
        .await;
    match &reply {
        Reply::Error(e) => assert!(e.starts_with("NOREPL Not enough reachable"), "{e}"),
        other => panic!("expected -NOREPL, got {other:?}"),
    }
    // Thawed, it is healthy again at once.
    cluster.thaw(2);
    assert_eq!(priority_of(&mut c0, &id2).await, "1");
    let reply = c0
        .call(&["ADDJOB", &q, "y", "5000", "REPLICATE", "3"])
        .await;
    assert!(matches!(reply, Reply::Status(_)), "{reply:?}");
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_frozen_node_handles_cluster_messages_held_for_it_once_thawed() {
    let cluster = cluster_with(Duration::from_secs(60)).await;
    let mut c0 = Raw::connect(cluster.node(0).addr).await;
    let q = queue("frozen-held");
    cluster.freeze(2);
    // Sent to node 2 while frozen (REPLJOB, then DELJOB when the ADDJOB
    // times out): once thawed it handles both in order, keeping no copy.
    let reply = c0.call(&["ADDJOB", &q, "x", "300", "REPLICATE", "3"]).await;
    assert!(matches!(reply, Reply::Error(_)), "{reply:?}");
    // An acked job's SETACK is held too.
    let reply = c0
        .call(&["ADDJOB", &q, "y", "5000", "REPLICATE", "3", "ASYNC"])
        .await;
    let Reply::Status(acked) = reply else {
        panic!("{reply:?}");
    };
    assert_eq!(c0.call(&["ACKJOB", &acked]).await, Reply::Int(1));
    cluster.thaw(2);
    let mut c2 = Raw::connect(cluster.node(2).addr).await;
    let empty = support::wait_for(Duration::from_secs(5), || {
        let addr = cluster.node(2).addr;
        let q = q.clone();
        async move {
            let mut c = Raw::connect(addr).await;
            let Reply::Array(Some(v)) = c.call(&["JSCAN", "BUSYLOOP", "QUEUE", &q]).await else {
                return false;
            };
            v.get(1) == Some(&Reply::Array(Some(Vec::new())))
        }
    })
    .await;
    assert!(empty.is_some(), "node 2 kept a copy");
    assert_eq!(c2.call(&["PING"]).await, Reply::Status("PONG".into()));
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_killed_frozen_node_restarts_running() {
    let cluster = cluster_with(Duration::from_secs(60)).await;
    cluster.freeze(2);
    cluster.kill(2).await;
    let mut c0 = Raw::connect(cluster.node(0).addr).await;
    assert_eq!(priority_of(&mut c0, &cluster.node(2).node_id).await, "10");
    cluster.restart(2).await.expect("restart");
    let mut c2 = Raw::connect(cluster.node(2).addr).await;
    assert_eq!(c2.call(&["PING"]).await, Reply::Status("PONG".into()));
    assert_eq!(priority_of(&mut c0, &cluster.node(2).node_id).await, "1");
    cluster.shutdown().await;
}
