//! A real 3-master Redis Cluster on loopback (when `redis-server` is
//! installed): push/consume, delayed, retry with dead letter and fan-out,
//! on topics spread over the masters.

mod support;

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use ezmq_core::spi::Source;
use ezmq_core::{
    handler_fn, ConsumeOptions, DeadLetterRecord, Job, MqClient, MqClientExt, PushOptions, Topic,
};
use ezmq_redis::RedisConfig;
use tokio::sync::mpsc;
use tokio::time::timeout;

/// Three cluster masters; killed (and their directory removed) on drop.
struct Cluster {
    nodes: Vec<support::RedisProcess>,
    dir: std::path::PathBuf,
}

impl Cluster {
    /// The `redis+cluster://` URL of every master.
    fn url(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", nodes.join(","))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port whose cluster bus port (+10000) is free too.
fn cluster_port() -> u16 {
    loop {
        let port = support::free_port();
        if port < 50_000 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
        let candidate = 20_000 + (uuid::Uuid::new_v4().as_u128() % 20_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", candidate)).is_ok()
            && std::net::TcpListener::bind(("127.0.0.1", candidate + 10_000)).is_ok()
        {
            return candidate;
        }
    }
}

async fn start_cluster() -> Cluster {
    let dir = support::temp_dir("cluster");
    let mut nodes = Vec::new();
    for i in 0..3 {
        let port = cluster_port();
        let node_dir = dir.join(format!("n{i}"));
        std::fs::create_dir_all(&node_dir).unwrap();
        let args = vec![
            "--cluster-enabled".to_owned(),
            "yes".to_owned(),
            "--cluster-config-file".to_owned(),
            node_dir.join("nodes.conf").display().to_string(),
            "--dir".to_owned(),
            node_dir.display().to_string(),
        ];
        nodes.push(support::RedisProcess::start(port, &args).await);
    }
    let cluster = Cluster { nodes, dir };
    let mut create = Command::new("redis-cli");
    create.arg("--cluster").arg("create");
    for node in &cluster.nodes {
        create.arg(format!("127.0.0.1:{}", node.port));
    }
    let out = create
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("run redis-cli --cluster create");
    assert!(
        out.status.success(),
        "cluster create failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    for node in &cluster.nodes {
        let client = redis::Client::open(node.url()).unwrap();
        let mut ok = false;
        for _ in 0..200 {
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query_async(&mut conn)
                .await
                .unwrap();
            if info.contains("cluster_state:ok") {
                ok = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(ok, "cluster never became ok");
    }
    cluster
}

#[tokio::test]
async fn every_feature_on_a_three_master_cluster() {
    if !support::can_start_redis_server() {
        return;
    }
    let cluster = start_cluster().await;
    let url = cluster.url();
    let config: RedisConfig = url.parse().unwrap();
    let config = config.with_lease(Duration::from_secs(2));
    let client = support::client(&config).await;

    // Push/consume and delayed on several topics (several slots/masters).
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let topics: Vec<String> = (0..6).map(|i| support::topic(&format!("c{i}"))).collect();
    for topic in &topics {
        let options = ConsumeOptions::new();
        support::forward(&client, topic, options, tx.clone(), support::body_of).await;
    }
    for topic in &topics {
        // A batch first, on a fresh cluster: its pipeline loads the
        // schedule script on the topic's node itself.
        let batch = client
            .push_batch(
                topic,
                vec![
                    (format!("batch now {topic}").into(), PushOptions::new()),
                    (
                        format!("batch delayed {topic}").into(),
                        PushOptions::new().with_delay(Duration::from_millis(300)),
                    ),
                ],
            )
            .await
            .unwrap();
        assert!(batch.iter().all(Result::is_ok), "{batch:?}");
        client
            .push_delay(topic, "late".into(), Duration::from_secs(3600))
            .await
            .unwrap();
        client
            .push_delay(
                topic,
                format!("delayed {topic}").into(),
                Duration::from_millis(500),
            )
            .await
            .unwrap();
        client
            .push(topic, format!("now {topic}").into())
            .await
            .unwrap();
        // Pushed twice with one message id each: stored once (the script's
        // keys share the topic's slot).
        for _ in 0..2 {
            let once = PushOptions::new().with_message_id(format!("once-{topic}"));
            client
                .push_with(topic, format!("once {topic}").into(), once)
                .await
                .unwrap();
            let once_late = PushOptions::new()
                .with_message_id(format!("once-late-{topic}"))
                .with_delay(Duration::from_millis(300));
            client
                .push_with(topic, format!("once delayed {topic}").into(), once_late)
                .await
                .unwrap();
        }
    }
    let mut got = Vec::new();
    for _ in 0..6 * topics.len() {
        got.push(
            timeout(Duration::from_secs(15), rx.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    got.sort();
    let mut want: Vec<String> = topics
        .iter()
        .flat_map(|t| {
            [
                format!("now {t}"),
                format!("delayed {t}"),
                format!("once {t}"),
                format!("once delayed {t}"),
                format!("batch now {t}"),
                format!("batch delayed {t}"),
            ]
        })
        .collect();
    want.sort();
    assert_eq!(got, want);
    assert!(timeout(Duration::from_millis(300), rx.recv())
        .await
        .is_err());
    assert_eq!(client.queue_len(&topics[0]).await.unwrap(), 0);

    // Retry, then dead letter.
    let retry_topic = support::topic("c-retry");
    let (atx, mut arx) = mpsc::unbounded_channel::<u32>();
    client
        .add_consume_listener_with(
            &retry_topic,
            ConsumeOptions::new()
                .with_max_attempts(2)
                .with_backoff(Duration::from_millis(50), Duration::from_millis(100)),
            move |job: Job| {
                let atx = atx.clone();
                async move {
                    let _ = atx.send(job.attempt());
                    Err::<(), _>(std::io::Error::other("no"))
                }
            },
        )
        .await
        .unwrap();
    let (dtx, mut drx) = mpsc::unbounded_channel::<DeadLetterRecord>();
    client
        .add_consume_listener(&format!("{retry_topic}.dead-letter"), move |job: Job| {
            let dtx = dtx.clone();
            async move {
                let _ = dtx.send(DeadLetterRecord::from_job(&job).unwrap());
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    client.push(&retry_topic, "x".into()).await.unwrap();
    assert_eq!(
        timeout(Duration::from_secs(10), arx.recv()).await.unwrap(),
        Some(1)
    );
    assert_eq!(
        timeout(Duration::from_secs(10), arx.recv()).await.unwrap(),
        Some(2)
    );
    let record = timeout(Duration::from_secs(10), drx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.attempts, 2);

    // Fan-out: two groups, each gets each message once.
    let btopic = Topic::new(support::topic("c-bcast")).unwrap();
    let (btx, mut brx) = mpsc::unbounded_channel::<(String, String)>();
    let mut members = Vec::new();
    for group in ["a", "a", "b"] {
        let member = support::client(&config).await;
        let group = Topic::new(group).unwrap();
        let m = member
            .runtime()
            .fan_out()
            .unwrap()
            .join_group(&btopic, &group, Duration::from_secs(60))
            .await
            .unwrap();
        let btx = btx.clone();
        let name = group.to_string();
        member
            .runtime()
            .listen(
                Source::Group {
                    topic: btopic.clone(),
                    group,
                },
                Arc::new(handler_fn(move |job: Job| {
                    let btx = btx.clone();
                    let name = name.clone();
                    async move {
                        let _ = btx.send((name, String::from_utf8_lossy(job.body()).into_owned()));
                        Ok::<(), std::io::Error>(())
                    }
                })),
                ConsumeOptions::new(),
            )
            .unwrap();
        members.push((member, m));
    }
    let fan_out = client.runtime().fan_out().unwrap();
    for i in 0..10 {
        let reached = fan_out
            .publish_to_groups(&btopic, format!("m{i}").into(), &PushOptions::new())
            .await
            .unwrap();
        assert_eq!(reached, Some(2));
    }
    let mut counts: HashMap<(String, String), usize> = HashMap::new();
    for _ in 0..20 {
        let seen = timeout(Duration::from_secs(15), brx.recv())
            .await
            .unwrap()
            .unwrap();
        *counts.entry(seen).or_default() += 1;
    }
    assert!(counts.values().all(|c| *c == 1), "{counts:?}");
    assert!(timeout(Duration::from_millis(300), brx.recv())
        .await
        .is_err());

    for (member, _) in members {
        member.shutdown(Duration::from_secs(5)).await.unwrap();
    }
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    drop(cluster);
}

/// The cluster as a broker of the behaviour suite.
#[derive(Debug)]
struct ClusterRedis {
    url: String,
}

#[async_trait::async_trait]
impl ezmq_conformance::Broker for ClusterRedis {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn expected_capabilities(&self) -> ezmq_core::spi::Capabilities {
        ezmq_core::spi::Capabilities::all()
    }

    fn url(&self) -> String {
        self.url.clone()
    }

    async fn connect(&self) -> ezmq_core::Result<ezmq_core::Client> {
        let config: RedisConfig = self.url.parse()?;
        ezmq_redis::connect(config).await
    }
}

/// Job control on a real cluster: the behaviour-suite cases of unique
/// keys, topic pauses, the job store and cron overlap, each of whose
/// keys live on the slot of its topic (or claim). The 1,000-job cancel
/// race runs on the single servers: its scripts run on one node either
/// way, and 500 concurrent O(n) scans outlast the command timeout on a
/// busy two-core machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_control_on_a_three_master_cluster() {
    use ezmq_conformance::{cases, run};

    if !support::can_start_redis_server() {
        return;
    }
    let cluster = start_cluster().await;
    let url = cluster.url();
    let broker = || ClusterRedis { url: url.clone() };
    run(broker(), cases::unique_key_admits_one_job).await;
    run(broker(), cases::pause_stops_every_listener_of_a_topic).await;
    run(broker(), cases::job_store_sees_ready_and_retrying_jobs).await;
    run(broker(), cases::cron_skips_overlapping_runs).await;
    drop(cluster);
}
