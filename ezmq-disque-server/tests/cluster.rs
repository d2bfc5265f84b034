//! `EmbeddedCluster` over TCP: HELLO, replication, acks, replica requeue,
//! federation and the kill / restart / partition hooks.

mod support;

use ezmq_disque_server::EmbeddedCluster;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::{queue, wait_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn conn(addr: SocketAddr) -> MultiplexedConnection {
    let client = redis::Client::open(format!("redis://{addr}/")).expect("client");
    let cfg = AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(20)));
    client
        .get_multiplexed_async_connection_with_config(&cfg)
        .await
        .expect("connect")
}

async fn conns(cluster: &EmbeddedCluster) -> Vec<MultiplexedConnection> {
    let mut out = Vec::new();
    for addr in cluster.addrs() {
        out.push(conn(addr).await);
    }
    out
}

async fn cmd(c: &mut MultiplexedConnection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(c).await
}

async fn addjob(c: &mut MultiplexedConnection, q: &str, body: &str, opts: &[&str]) -> String {
    let mut args = vec!["ADDJOB", q, body, "5000"];
    args.extend_from_slice(opts);
    match cmd(c, &args).await.expect("ADDJOB") {
        Value::SimpleString(s) => s,
        other => panic!("ADDJOB: unexpected reply {other:?}"),
    }
}

async fn int(c: &mut MultiplexedConnection, args: &[&str]) -> i64 {
    match cmd(c, args).await.expect("integer command") {
        Value::Int(n) => n,
        other => panic!("{args:?}: unexpected reply {other:?}"),
    }
}

async fn has_job(c: &mut MultiplexedConnection, id: &str) -> bool {
    !matches!(cmd(c, &["SHOW", id]).await.expect("SHOW"), Value::Nil)
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("expected a string, got {other:?}"),
    }
}

/// The SHOW field `name`.
async fn show_field(c: &mut MultiplexedConnection, id: &str, name: &str) -> Option<Value> {
    let Value::Array(v) = cmd(c, &["SHOW", id]).await.expect("SHOW") else {
        return None;
    };
    v.chunks(2)
        .find(|p| text(&p[0]) == name)
        .map(|p| p[1].clone())
}

/// `(queue, id, body)` of each job of a GETJOB reply.
fn jobs(v: Value) -> Vec<(String, String, String)> {
    match v {
        Value::Nil => Vec::new(),
        Value::Array(items) => items
            .into_iter()
            .map(|j| match j {
                Value::Array(f) => (text(&f[0]), text(&f[1]), text(&f[2])),
                other => panic!("job entry: {other:?}"),
            })
            .collect(),
        other => panic!("GETJOB: unexpected reply {other:?}"),
    }
}

/// `(id, port, priority)` of every HELLO entry.
async fn hello(c: &mut MultiplexedConnection) -> (String, Vec<(String, u16, String)>) {
    let Value::Array(v) = cmd(c, &["HELLO"]).await.expect("HELLO") else {
        panic!("HELLO is an array");
    };
    let me = text(&v[1]);
    let entries = v[2..]
        .iter()
        .map(|e| match e {
            Value::Array(f) => (text(&f[0]), text(&f[2]).parse().expect("port"), text(&f[3])),
            other => panic!("HELLO entry {other:?}"),
        })
        .collect();
    (me, entries)
}

#[tokio::test]
async fn hello_lists_every_node() {
    let cluster = EmbeddedCluster::start(3).await.expect("cluster");
    let mut cs = conns(&cluster).await;
    for (i, c) in cs.iter_mut().enumerate() {
        let (me, entries) = hello(c).await;
        assert_eq!(me, cluster.node(i).node_id);
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].0, me, "own entry first");
        for (j, n) in (0..3).map(|j| (j, cluster.node(j))) {
            let e = entries.iter().find(|e| e.0 == n.node_id).expect("listed");
            assert_eq!(e.1, n.addr.port(), "port of node {j}");
            assert_eq!(e.2, "1", "priority of healthy node {j}");
        }
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn replicate_two_stores_two_copies_and_ack_removes_them() {
    let cluster = EmbeddedCluster::start(3).await.expect("cluster");
    let mut cs = conns(&cluster).await;
    let q = queue("repl2");
    let id = addjob(&mut cs[0], &q, "two", &["REPLICATE", "2"]).await;
    let mut holders = 0;
    for c in cs.iter_mut() {
        holders += usize::from(has_job(c, &id).await);
    }
    assert_eq!(holders, 2, "REPLICATE 2 copies");
    assert_eq!(
        int(&mut cs[0], &["QLEN", &q]).await,
        1,
        "queued on the origin"
    );

    // Default REPLICATE is 3; ACKJOB on a replica removes every copy.
    let id = addjob(&mut cs[0], &q, "three", &[]).await;
    for (i, c) in cs.iter_mut().enumerate() {
        let state = show_field(c, &id, "state")
            .await
            .expect("default replication reaches every node");
        let want = if i == 0 { "queued" } else { "active" };
        assert_eq!(text(&state), want, "state on node {i}");
        let Some(Value::Array(nodes)) = show_field(c, &id, "nodes-delivered").await else {
            panic!("nodes-delivered is an array");
        };
        assert_eq!(nodes.len(), 3, "nodes-delivered on node {i}");
    }
    assert_eq!(int(&mut cs[1], &["ACKJOB", &id]).await, 1);
    let gone = wait_for(Duration::from_secs(5), || {
        let mut cs = cs.clone();
        let id = id.clone();
        async move {
            for c in cs.iter_mut() {
                if has_job(c, &id).await {
                    return false;
                }
            }
            true
        }
    })
    .await;
    assert!(gone.is_some(), "ACKJOB removes every copy");
    assert_eq!(
        int(&mut cs[0], &["QLEN", &q]).await,
        1,
        "only the first job left"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn replica_requeues_after_the_origin_is_killed() {
    let cluster = EmbeddedCluster::start(3).await.expect("cluster");
    let mut cs = conns(&cluster).await;
    let q = queue("requeue");
    let id = addjob(
        &mut cs[0],
        &q,
        "survivor",
        &["REPLICATE", "2", "RETRY", "1"],
    )
    .await;
    let got = jobs(
        cmd(&mut cs[0], &["GETJOB", "NOHANG", "FROM", &q])
            .await
            .unwrap(),
    );
    assert_eq!(got.len(), 1, "delivered once by the origin");
    let t0 = Instant::now();
    cluster.kill(0).await;
    assert!(!cluster.is_running(0));
    // Whichever node holds the replica, node 1 gets it (its own copy or by
    // federation from node 2).
    let got = jobs(
        cmd(&mut cs[1], &["GETJOB", "TIMEOUT", "8000", "FROM", &q])
            .await
            .unwrap(),
    );
    assert_eq!(got.len(), 1, "the replica requeued the job");
    assert_eq!(got[0].1, id);
    assert_eq!(got[0].2, "survivor");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "requeued after RETRY"
    );
    assert_eq!(int(&mut cs[1], &["ACKJOB", &id]).await, 1);
    cluster.shutdown().await;
}

#[tokio::test]
async fn federation_moves_jobs_to_a_consumer_on_another_node() {
    let cluster = EmbeddedCluster::start(3).await.expect("cluster");
    let mut cs = conns(&cluster).await;
    let q = queue("fed");
    // An existing job.
    let id = addjob(&mut cs[0], &q, "existing", &["REPLICATE", "1"]).await;
    let got = jobs(
        cmd(&mut cs[1], &["GETJOB", "TIMEOUT", "5000", "FROM", &q])
            .await
            .unwrap(),
    );
    assert_eq!(got[0].1, id);
    assert_eq!(
        int(&mut cs[0], &["QLEN", &q]).await,
        0,
        "moved off the origin"
    );
    assert_eq!(int(&mut cs[1], &["ACKJOB", &id]).await, 1);

    // A consumer that blocked before the job existed.
    // A connection of its own: a multiplexed connection would queue the
    // QSTAT polls behind the blocked GETJOB.
    let mut consumer = conn(cluster.node(2).addr).await;
    let q2 = q.clone();
    let waiter = tokio::spawn(async move {
        let v = cmd(&mut consumer, &["GETJOB", "TIMEOUT", "10000", "FROM", &q2]).await;
        (v, Instant::now())
    });
    let blocked = wait_for(Duration::from_secs(5), || {
        let mut c = cs[2].clone();
        let q = q.clone();
        async move { support::qstat_field(&mut c, &q, "blocked").await == Some(1) }
    })
    .await;
    assert!(blocked.is_some(), "consumer blocked");
    let t0 = Instant::now();
    let id = addjob(&mut cs[0], &q, "late", &["REPLICATE", "2"]).await;
    let (v, at) = waiter.await.expect("consumer task");
    let got = jobs(v.unwrap());
    assert_eq!(got[0].1, id);
    assert!(
        at.duration_since(t0) < Duration::from_secs(2),
        "federation to a blocked consumer took {:?}",
        at.duration_since(t0)
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn kill_and_restart_a_node() {
    let cluster = EmbeddedCluster::start(3).await.expect("cluster");
    let mut cs = conns(&cluster).await;
    let q = queue("restart");
    let old = cluster.node(1);
    let id = addjob(&mut cs[1], &q, "lost", &["REPLICATE", "1"]).await;
    cluster.kill(1).await;
    assert!(
        tokio::net::TcpStream::connect(old.addr).await.is_err(),
        "port closed"
    );
    let (_, entries) = hello(&mut cs[0]).await;
    let e = entries
        .iter()
        .find(|e| e.0 == old.node_id)
        .expect("still listed");
    assert_eq!(e.2, "10", "a killed node is reported failing");
    let r = cmd(&mut cs[0], &["ADDJOB", &q, "x", "1000", "REPLICATE", "3"]).await;
    let err = r.expect_err("REPLICATE 3 with a node down");
    assert_eq!(err.code(), Some("NOREPL"));

    cluster.restart(1).await.expect("restart");
    assert!(cluster.is_running(1));
    assert_eq!(cluster.node(1), old, "same port and id");
    let mut c1 = conn(old.addr).await;
    assert!(!has_job(&mut c1, &id).await, "restarted empty");
    let (me, entries) = hello(&mut c1).await;
    assert_eq!(me, old.node_id);
    assert!(
        entries.iter().all(|e| e.2 == "1"),
        "healthy again: {entries:?}"
    );
    let id = addjob(&mut cs[0], &q, "y", &["REPLICATE", "3"]).await;
    assert!(
        has_job(&mut c1, &id).await,
        "replicated to the restarted node"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn partition_and_heal_a_node() {
    let cluster = EmbeddedCluster::start(3).await.expect("cluster");
    let mut cs = conns(&cluster).await;
    let q = queue("cut");
    cluster.partition(2);
    // Still serving its clients, but alone.
    assert_eq!(int(&mut cs[2], &["QLEN", &q]).await, 0);
    let (_, entries) = hello(&mut cs[2]).await;
    assert_eq!(entries[0].2, "1", "own entry");
    assert!(entries[1..].iter().all(|e| e.2 == "10"), "{entries:?}");
    let (_, entries) = hello(&mut cs[0]).await;
    let cut = cluster.node(2).node_id;
    assert_eq!(entries.iter().find(|e| e.0 == cut).unwrap().2, "10");
    let err = cmd(&mut cs[2], &["ADDJOB", &q, "x", "1000", "REPLICATE", "2"])
        .await
        .expect_err("no replica reachable");
    assert_eq!(err.code(), Some("NOREPL"));
    let local = addjob(&mut cs[2], &q, "local", &["REPLICATE", "1"]).await;
    // No federation across the cut.
    let v = cmd(&mut cs[0], &["GETJOB", "TIMEOUT", "300", "FROM", &q]).await;
    assert!(jobs(v.unwrap()).is_empty());

    cluster.heal(2);
    let id = addjob(&mut cs[2], &q, "healed", &["REPLICATE", "3"]).await;
    assert!(has_job(&mut cs[0], &id).await);
    assert_eq!(int(&mut cs[2], &["FASTACK", &id, &local]).await, 2);
    cluster.shutdown().await;
}

#[tokio::test]
async fn sync_replication_times_out_when_replicas_refuse() {
    let cluster = EmbeddedCluster::start(3).await.expect("cluster");
    let mut cs = conns(&cluster).await;
    let q = queue("norepl");
    // Nodes ignore replication requests for queues paused in input.
    for c in &mut cs[1..] {
        cmd(c, &["PAUSE", &q, "in"]).await.expect("PAUSE");
    }
    let t0 = Instant::now();
    let err = cmd(&mut cs[0], &["ADDJOB", &q, "x", "500", "REPLICATE", "2"])
        .await
        .expect_err("no replica accepts");
    assert_eq!(err.code(), Some("NOREPL"));
    assert!(
        t0.elapsed() >= Duration::from_millis(450),
        "{:?}",
        t0.elapsed()
    );
    for c in cs.iter_mut() {
        let Value::Array(v) = cmd(c, &["JSCAN", "BUSYLOOP", "QUEUE", &q]).await.unwrap() else {
            panic!("JSCAN reply");
        };
        assert_eq!(v[1], Value::Array(vec![]), "no job left behind");
    }
    // ASYNC returns at once; the copy arrives once a replica accepts.
    let id = addjob(&mut cs[0], &q, "async", &["REPLICATE", "2", "ASYNC"]).await;
    assert_eq!(int(&mut cs[0], &["QLEN", &q]).await, 1);
    cmd(&mut cs[1], &["PAUSE", &q, "none"]).await.unwrap();
    let replicated = wait_for(Duration::from_secs(5), || {
        let mut c = cs[1].clone();
        let id = id.clone();
        async move { has_job(&mut c, &id).await }
    })
    .await;
    assert!(
        replicated.is_some(),
        "ASYNC copy delivered after the unpause"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn ports_from_a_base() {
    // Find three free consecutive ports by binding one and trying above it.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("probe");
    let base = probe.local_addr().unwrap().port().saturating_sub(3);
    drop(probe);
    let config = ezmq_disque_server::ServerConfig::default().with_port(base);
    match EmbeddedCluster::start_with(3, config).await {
        Ok(cluster) => {
            let ports: Vec<u16> = cluster.addrs().iter().map(|a| a.port()).collect();
            assert_eq!(ports, vec![base, base + 1, base + 2]);
            cluster.shutdown().await;
        }
        // Another process may hold one of those ports; that is not a bug.
        Err(e) => eprintln!("SKIP ports_from_a_base: {e}"),
    }
}

#[tokio::test]
async fn leaving_node_is_seen_everywhere_and_stores_no_new_jobs() {
    let cluster = EmbeddedCluster::start(3).await.expect("cluster");
    let mut cs = conns(&cluster).await;
    let leaving_id = cluster.node(2).node_id;
    let q = queue("leaving");
    cmd(&mut cs[2], &["CLUSTER", "LEAVING", "yes"])
        .await
        .expect("CLUSTER LEAVING yes");
    for c in cs.iter_mut() {
        let (_, entries) = hello(c).await;
        let e = entries.iter().find(|e| e.0 == leaving_id).expect("listed");
        assert_eq!(e.2, "100", "priority of the leaving node");
    }
    // Only two nodes take new jobs now.
    let r = cmd(&mut cs[0], &["ADDJOB", &q, "x", "2000"]).await;
    assert!(
        r.as_ref().is_err_and(|e| e.code() == Some("NOREPL")),
        "{r:?}"
    );
    // A job added on the leaving node is held and queued by the others only.
    let id = addjob(&mut cs[2], &q, "via-leaving", &["REPLICATE", "2"]).await;
    assert_eq!(
        &id[2..10],
        &leaving_id[..8],
        "id prefix of the leaving node"
    );
    assert!(
        !has_job(&mut cs[2], &id).await,
        "the leaving node keeps no copy"
    );
    assert!(has_job(&mut cs[0], &id).await && has_job(&mut cs[1], &id).await);
    let queued =
        wait_for(Duration::from_secs(5), || {
            let mut cs = cs.clone();
            let q = q.clone();
            async move {
                int(&mut cs[0], &["QLEN", &q]).await + int(&mut cs[1], &["QLEN", &q]).await == 1
            }
        })
        .await;
    assert!(queued.is_some(), "one of the other nodes queues the job");
    let r = cmd(&mut cs[2], &["GETJOB", "TIMEOUT", "100", "FROM", &q]).await;
    assert!(r.is_err_and(|e| e.code() == Some("LEAVING")));
    cmd(&mut cs[2], &["CLUSTER", "LEAVING", "no"])
        .await
        .expect("CLUSTER LEAVING no");
    addjob(&mut cs[0], &q, "three", &[]).await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_hung_node_accepts_but_answers_nothing_until_resumed() {
    let cluster = EmbeddedCluster::start(3).await.expect("cluster");
    let mut c = conns(&cluster).await;
    cluster.hang(0);
    // A new connection is accepted, but nothing is answered, not even PING.
    let mut fresh = tokio::net::TcpStream::connect(cluster.node(0).addr)
        .await
        .expect("a hung node still accepts");
    fresh.write_all(b"PING\r\n").await.expect("send PING");
    let mut reply = [0u8; 7];
    let silent = tokio::time::timeout(Duration::from_millis(300), fresh.read(&mut reply)).await;
    assert!(silent.is_err(), "a hung node answered: {silent:?}");
    // The others see it failing and replicate without it.
    let hello = cmd(&mut c[1], &["HELLO"]).await.expect("HELLO");
    let Value::Array(items) = hello else {
        panic!("HELLO: {hello:?}")
    };
    let id0 = cluster.node(0).node_id;
    let prio = items
        .iter()
        .skip(2)
        .find_map(|e| match e {
            Value::Array(f) if text(&f[0]) == id0 => Some(text(&f[3])),
            _ => None,
        })
        .expect("node 0 in HELLO");
    assert_eq!(prio, "10");
    let started = Instant::now();
    addjob(&mut c[1], "hq", "b", &["REPLICATE", "2"]).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "replication waited for the hung node"
    );
    // Resumed, it answers what it was sent meanwhile.
    cluster.resume(0);
    tokio::time::timeout(Duration::from_secs(5), fresh.read_exact(&mut reply))
        .await
        .expect("answered once resumed")
        .expect("read the reply");
    assert_eq!(&reply, b"+PONG\r\n");
    cluster.shutdown().await;
}
