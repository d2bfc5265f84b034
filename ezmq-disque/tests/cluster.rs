//! The Disque backend against an embedded three-node cluster
//! (`ezmq_test_support::TestCluster`): failover when a node dies, no job
//! lost with `REPLICATE 2`, cross-node push → listener latency, and the
//! cluster-wide queue length.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod support;

use ezmq_disque::{Job, MqClient, MqClientExt};
use ezmq_test_support::{init_tracing, TestCluster};
use support::{affinity_node, qlen, raw};
use tokio::sync::mpsc;
use tokio::time::timeout;

/// Generous bound for anything that should happen "soon".
const SOON: Duration = Duration::from_secs(30);

async fn setup() -> TestCluster {
    init_tracing();
    TestCluster::start(3).await
}

/// Starts a listener that sends every body it gets to the returned channel.
async fn collect(client: &impl MqClient, topic: &str) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    client
        .add_consume_listener(topic, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(String::from_utf8_lossy(job.body()).into_owned());
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .expect("start the listener");
    rx
}

/// Receives until every body of `want` was seen (duplicates allowed).
async fn receive_all(rx: &mut mpsc::UnboundedReceiver<String>, want: &HashSet<String>) {
    let mut seen = HashSet::new();
    let result = timeout(SOON, async {
        while !want.is_subset(&seen) {
            match rx.recv().await {
                Some(body) => {
                    seen.insert(body);
                }
                None => break,
            }
        }
    })
    .await;
    let missing: Vec<_> = want.difference(&seen).collect();
    assert!(
        result.is_ok() && missing.is_empty(),
        "jobs never consumed: {missing:?}"
    );
}

#[tokio::test]
async fn producers_and_listeners_fail_over_when_their_node_dies() {
    let cluster = setup().await;
    let producer = cluster.client().await;
    let consumer = cluster.client().await;
    let topic = cluster.unique_topic("failover");
    let home = affinity_node(&cluster, &producer, &topic).await;
    let mut rx = collect(&consumer, &topic).await;

    let before: HashSet<String> = (0..10).map(|i| format!("before-{i}")).collect();
    for body in &before {
        producer
            .push(&topic, body.clone().into())
            .await
            .expect("push");
    }
    receive_all(&mut rx, &before).await;

    cluster.kill(home).await;
    let after: HashSet<String> = (0..10).map(|i| format!("after-{i}")).collect();
    for body in &after {
        producer
            .push(&topic, body.clone().into())
            .await
            .expect("push after the node died");
    }
    receive_all(&mut rx, &after).await;

    producer.shutdown(Duration::from_secs(1)).await.unwrap();
    consumer.shutdown(Duration::from_secs(1)).await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test]
async fn no_job_is_lost_with_replicate_two_when_a_node_dies() {
    let cluster = setup().await;
    let config = cluster
        .config()
        .with_default_replicate(2)
        .with_default_retry(Duration::from_secs(1));
    let producer = ezmq_disque::connect(config.clone()).await.expect("connect");
    let topic = cluster.unique_topic("no-loss");
    let home = affinity_node(&cluster, &producer, &topic).await;

    // Queued on the affinity node, each with one replica elsewhere.
    let bodies: HashSet<String> = (0..20).map(|i| format!("job-{i}")).collect();
    for body in &bodies {
        producer
            .push(&topic, body.clone().into())
            .await
            .expect("push");
    }
    assert_eq!(qlen(&cluster.addr(home), &topic).await, 21);
    cluster.kill(home).await;

    // The replicas requeue after RETRY; the listener's node gets every job
    // (its own copies, and the others by federation).
    let consumer = ezmq_disque::connect(config).await.expect("connect");
    let mut rx = collect(&consumer, &topic).await;
    receive_all(&mut rx, &bodies).await;

    producer.shutdown(Duration::from_secs(1)).await.unwrap();
    consumer.shutdown(Duration::from_secs(1)).await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test]
async fn cross_node_push_reaches_a_listener_quickly() {
    let cluster = setup().await;
    // Seeded with different nodes: both learn the whole cluster with HELLO
    // and route the topic to the same node.
    for seed in [0, 2] {
        let backend =
            ezmq_disque::DisqueBackend::connect(cluster.config_seeded(&[cluster.addr(seed)]))
                .await
                .unwrap();
        assert_eq!(backend.nodes().len(), 3, "seeded with node {seed}");
    }
    let producer = cluster.client_seeded(0).await;
    let consumer = cluster.client_seeded(2).await;
    let topic = cluster.unique_topic("latency");

    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let sent2 = sent.clone();
    consumer
        .add_consume_listener(&topic, move |job: Job| {
            let tx = tx.clone();
            let sent = sent2.clone();
            async move {
                let body = String::from_utf8_lossy(job.body()).into_owned();
                let at = sent.lock().unwrap().get(&body).copied();
                let _ = tx.send(at.map(|t| t.elapsed()));
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .expect("listener");

    const N: usize = 50;
    let mut latencies = Vec::with_capacity(N);
    for i in 0..N {
        let body = format!("m-{i}");
        sent.lock().unwrap().insert(body.clone(), Instant::now());
        producer.push(&topic, body.into()).await.expect("push");
        let got = timeout(SOON, rx.recv())
            .await
            .expect("job consumed in time")
            .expect("listener alive");
        latencies.push(got.expect("a job we sent"));
    }
    latencies.sort();
    let p99 = latencies[(N * 99).div_ceil(100) - 1];
    assert!(
        p99 < Duration::from_millis(500),
        "p99 push -> listener latency {p99:?} (all: {latencies:?})"
    );

    producer.shutdown(Duration::from_secs(1)).await.unwrap();
    consumer.shutdown(Duration::from_secs(1)).await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test]
async fn queue_len_is_the_cluster_total() {
    let cluster = setup().await;
    let client = cluster.client().await;
    let topic = cluster.unique_topic("qlen");
    // Jobs queued on every node: 1 on node 0, 2 on node 1, 3 on node 2,
    // plus one with the default replication (3 copies, queued once).
    for i in 0..3 {
        let mut c = raw(&cluster.addr(i)).await;
        for _ in 0..=i {
            let _: String = redis::cmd("ADDJOB")
                .arg(&topic)
                .arg("x")
                .arg(5000)
                .arg("REPLICATE")
                .arg(1)
                .query_async(&mut c)
                .await
                .expect("ADDJOB");
        }
    }
    let _: String = redis::cmd("ADDJOB")
        .arg(&topic)
        .arg("y")
        .arg(5000)
        .query_async(&mut raw(&cluster.addr(1)).await)
        .await
        .expect("ADDJOB");
    assert_eq!(client.queue_len(&topic).await.expect("queue_len"), 7);

    // A dead node may hold jobs: a sum without it would be wrong, so
    // queue_len says it cannot answer rather than report a partial count.
    cluster.kill(2).await;
    let err = client.queue_len(&topic).await.unwrap_err();
    assert!(err.to_string().contains("partial"), "{err}");
    assert!(err.is_retryable(), "{err}");
    client.shutdown(Duration::from_secs(1)).await.unwrap();
    cluster.shutdown().await;
}
