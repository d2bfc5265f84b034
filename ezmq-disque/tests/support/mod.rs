//! Helpers shared by the cluster test binaries: raw node connections, a
//! node's queue length, the node a topic is routed to, pushing and
//! recording deliveries under load.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ezmq_disque::{DisqueClient, DisquePushOptions, Job, MqClient, MqClientExt, PushOptions};
use ezmq_test_support::{eventually, init_tracing, TestCluster};
use tokio::task::JoinSet;

/// When each body was delivered (every delivery, duplicates included).
pub(crate) type Deliveries = Arc<Mutex<HashMap<String, Vec<Instant>>>>;

/// A listener per topic recording every delivery.
pub(crate) async fn listen(client: &DisqueClient, topics: &[String], deliveries: &Deliveries) {
    for topic in topics {
        let deliveries = Arc::clone(deliveries);
        client
            .add_consume_listener(topic, move |job: Job| {
                let deliveries = Arc::clone(&deliveries);
                async move {
                    let body = String::from_utf8_lossy(job.body()).into_owned();
                    let mut map = deliveries.lock().unwrap();
                    map.entry(body).or_default().push(Instant::now());
                    Ok::<(), std::io::Error>(())
                }
            })
            .await
            .expect("start a listener");
    }
}

/// A three-node cluster ready for a load test: a producer and a consumer,
/// topics spread over the nodes, each topic's affinity node, and a
/// listener per topic recording every delivery.
pub(crate) struct UnderLoad {
    pub(crate) cluster: TestCluster,
    /// The clients' command timeout.
    pub(crate) command_timeout: Duration,
    pub(crate) producer: DisqueClient,
    pub(crate) consumer: DisqueClient,
    pub(crate) topics: Vec<String>,
    /// `homes[t]`: the index of topic `t`'s affinity node.
    pub(crate) homes: Vec<usize>,
    pub(crate) deliveries: Deliveries,
}

/// Starts [`UnderLoad`]: clients with `retry` as the jobs' default RETRY,
/// `topics` topics named `<name>-<i>`.
pub(crate) async fn under_load(name: &str, topics: usize, retry: Duration) -> UnderLoad {
    init_tracing();
    let cluster = TestCluster::start(3).await;
    let config = cluster.config().with_default_retry(retry);
    let command_timeout = config.command_timeout;
    let producer = ezmq_disque::connect(config.clone()).await.expect("connect");
    let consumer = ezmq_disque::connect(config).await.expect("connect");
    let topics: Vec<String> = (0..topics)
        .map(|i| cluster.unique_topic(&format!("{name}-{i}")))
        .collect();
    let mut homes = Vec::new();
    for topic in &topics {
        homes.push(affinity_node(&cluster, &producer, topic).await);
    }
    let deliveries: Deliveries = Arc::default();
    listen(&consumer, &topics, &deliveries).await;
    UnderLoad {
        cluster,
        command_timeout,
        producer,
        consumer,
        topics,
        homes,
        deliveries,
    }
}

impl UnderLoad {
    /// Shuts the clients and the cluster down.
    pub(crate) async fn shutdown(self) {
        self.producer
            .shutdown(Duration::from_secs(1))
            .await
            .unwrap();
        self.consumer
            .shutdown(Duration::from_secs(1))
            .await
            .unwrap();
        self.cluster.shutdown().await;
    }
}

/// What [`wait_for_deliveries`] saw.
pub(crate) struct Delivered {
    /// Every expected job arrived in time.
    pub(crate) all: bool,
    /// The deliveries, once waiting ended.
    pub(crate) map: HashMap<String, Vec<Instant>>,
    /// The bodies of expected jobs not delivered.
    pub(crate) missing: Vec<String>,
}

/// Waits up to `within` until every push `expected(p)` holds for was
/// delivered.
pub(crate) async fn wait_for_deliveries(
    deliveries: &Deliveries,
    pushed: &[Pushed],
    within: Duration,
    expected: impl Fn(&Pushed) -> bool,
) -> Delivered {
    let expected = &expected;
    let all = eventually(within, || {
        let deliveries = Arc::clone(deliveries);
        async move {
            let map = deliveries.lock().unwrap();
            pushed
                .iter()
                .all(|p| !expected(p) || map.contains_key(&p.body))
        }
    })
    .await;
    let map = deliveries.lock().unwrap().clone();
    let missing = pushed
        .iter()
        .filter(|p| expected(p) && !map.contains_key(&p.body))
        .map(|p| p.body.clone())
        .collect();
    Delivered { all, map, missing }
}

/// The p50, p99 and slowest of the pushes' latencies.
pub(crate) fn latencies(pushed: &[Pushed]) -> (Duration, Duration, Duration) {
    let mut took: Vec<Duration> = pushed.iter().map(|p| p.took).collect();
    took.sort();
    (
        percentile(&took, 50),
        percentile(&took, 99),
        took[took.len() - 1],
    )
}

/// A push's body, topic (index into the topics), start, how long it
/// took, and whether it failed with an unknown outcome (sent to a node
/// found hung or stopped: the job may be stored there).
pub(crate) struct Pushed {
    pub(crate) body: String,
    pub(crate) topic: usize,
    pub(crate) started: Instant,
    pub(crate) took: Duration,
    pub(crate) outcome_unknown: bool,
}

/// Pushes `count` jobs (`job-<i>`), one every `every`, round robin over
/// `topics`, each in its own task (a slow push does not hold back the
/// next); calls `at(i)` before push `i` is started. Panics on a push
/// failing for any other reason than an unknown outcome.
pub(crate) async fn load(
    client: &DisqueClient,
    topics: &[String],
    count: usize,
    every: Duration,
    mut at: impl FnMut(usize),
) -> Vec<Pushed> {
    let mut tick = tokio::time::interval(every);
    let mut tasks = JoinSet::new();
    for i in 0..count {
        tick.tick().await;
        at(i);
        let client = client.clone();
        let topic = i % topics.len();
        let name = topics[topic].clone();
        tasks.spawn(async move {
            let body = format!("job-{i}");
            let started = Instant::now();
            let outcome_unknown = match client.push(&name, body.clone().into()).await {
                Ok(_) => false,
                Err(e) if e.is_outcome_unknown() => true,
                Err(e) => panic!("push {i} failed: {e:#}"),
            };
            Pushed {
                body,
                topic,
                started,
                took: started.elapsed(),
                outcome_unknown,
            }
        });
    }
    let mut pushed = Vec::with_capacity(count);
    while let Some(done) = tasks.join_next().await {
        pushed.push(done.expect("push task"));
    }
    pushed
}

/// The `p`th percentile of `sorted`.
pub(crate) fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p).div_ceil(100).saturating_sub(1)]
}

/// A raw connection to the node at `addr`.
pub(crate) async fn raw(addr: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(format!("redis://{addr}/"))
        .expect("redis client")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to a node")
}

/// `QLEN topic` on the node at `addr` alone.
pub(crate) async fn qlen(addr: &str, topic: &str) -> i64 {
    redis::cmd("QLEN")
        .arg(topic)
        .query_async(&mut raw(addr).await)
        .await
        .expect("QLEN")
}

/// Pushes a probe with `REPLICATE 1` and returns the index of the node it
/// was queued on: the topic's affinity node. The probe is consumed later
/// like any job.
pub(crate) async fn affinity_node(
    cluster: &TestCluster,
    client: &impl MqClient,
    topic: &str,
) -> usize {
    client
        .push_with(
            topic,
            "probe".into(),
            PushOptions::new().with_backend_options(DisquePushOptions::new().with_replicate(1)),
        )
        .await
        .expect("push the probe");
    for i in 0..cluster.addrs().len() {
        if qlen(&cluster.addr(i), topic).await == 1 {
            return i;
        }
    }
    panic!("probe job not queued on any node");
}
