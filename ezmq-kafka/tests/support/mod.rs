//! The Kafka test broker (`EZMQ_TEST_KAFKA_URL`, default
//! `kafka://127.0.0.1:9092`, where `.ci/run` starts nisshi), a prefix of
//! this run's own, and the cleanup of the topics a test made.

#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ezmq_kafka::{KafkaBackend, KafkaCluster, KafkaConfig};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

/// The test broker's URL.
pub(crate) fn url() -> String {
    ezmq_test_support::kafka_url()
}

/// A prefix no earlier run used: `ezmq-test-<unix secs>-<pid>-<n>`, so
/// leftovers of a run on a long-lived broker are never read again.
pub(crate) fn prefix() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("ezmq-test-{secs}-{}-{n}", std::process::id())
}

/// The test broker under `prefix`: topics of 3 partitions, a connect
/// that gives up after 3 s.
pub(crate) fn config(prefix: &str) -> KafkaConfig {
    KafkaConfig::new(url())
        .with_prefix(prefix)
        .with_partitions(3)
        .with_connect_timeout(Duration::from_secs(3))
}

/// A connected cluster handle with a fresh prefix, or `None` after the
/// skip line (a panic when Kafka is required).
pub(crate) async fn cluster() -> Option<KafkaCluster> {
    match KafkaCluster::connect(config(&prefix())).await {
        Ok(cluster) => Some(cluster),
        Err(err) if err.is_connection_error() => {
            ezmq_test_support::skip_or_require("kafka", &url(), &err);
            None
        }
        Err(err) => panic!("connecting to {}: {err}", url()),
    }
}

/// A backend of the test broker with `config`, or `None` after the skip
/// line (a panic when Kafka is required).
pub(crate) async fn backend(config: KafkaConfig) -> Option<KafkaBackend> {
    match KafkaBackend::connect(config).await {
        Ok(backend) => Some(backend),
        Err(err) if err.is_connection_error() => {
            ezmq_test_support::skip_or_require("kafka", &url(), &err);
            None
        }
        Err(err) => panic!("connecting to {}: {err}", url()),
    }
}

/// A client of the test broker under `prefix` ([`config`]), or `None`
/// after the skip line (a panic when Kafka is required).
pub(crate) async fn client(prefix: &str) -> Option<ezmq_core::Client> {
    match ezmq_kafka::connect(config(prefix)).await {
        Ok(client) => Some(client),
        Err(err) if err.is_connection_error() => {
            ezmq_test_support::skip_or_require("kafka", &url(), &err);
            None
        }
        Err(err) => panic!("connecting to {}: {err}", url()),
    }
}

/// Closes `backends`, then deletes the claim log of `prefix` (what a
/// test of claims or inboxes leaves).
pub(crate) async fn close_and_clean(backends: &[&KafkaBackend], prefix: &str) {
    for backend in backends {
        ezmq_core::spi::Backend::close(*backend)
            .await
            .expect("close");
    }
    delete_topics(&[&format!("{prefix}.claims")]).await;
}

/// `bootstrap.servers` for a raw rdkafka client of the test broker.
pub(crate) fn bootstrap() -> String {
    url().trim_start_matches("kafka://").to_owned()
}

/// A raw rdkafka admin client of the test broker.
pub(crate) fn admin() -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("an admin client")
}

/// Deletes `topics` (what a test created), logging what it could not.
pub(crate) async fn delete_topics(topics: &[&str]) {
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(5)));
    match admin().delete_topics(topics, &options).await {
        Ok(results) => {
            for result in results {
                if let Err((topic, code)) = result {
                    eprintln!("could not delete test topic {topic}: {code}");
                }
            }
        }
        Err(err) => eprintln!("could not delete test topics {topics:?}: {err}"),
    }
}

/// The nisshi binary: `EZMQ_NISSHI`, or where `.ci/run` caches it.
pub(crate) fn nisshi_binary() -> Option<std::path::PathBuf> {
    let path = match std::env::var_os("EZMQ_NISSHI") {
        Some(path) => std::path::PathBuf::from(path),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(std::path::PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache"))
                })?;
            cache.join("ezmq/nisshi-0.8.1/bin/nisshi")
        }
    };
    path.is_file().then_some(path)
}

/// A private nisshi broker on a free loopback port, with its SQLite file
/// in a folder of its own; killed (SIGKILL) when dropped.
pub(crate) struct PrivateBroker {
    binary: std::path::PathBuf,
    dir: std::path::PathBuf,
    pub(crate) port: u16,
    child: Option<std::process::Child>,
}

impl PrivateBroker {
    /// Starts one and waits until it accepts connections.
    pub(crate) fn start(binary: std::path::PathBuf) -> PrivateBroker {
        let port = ezmq_test_support::free_port();
        let dir = std::env::temp_dir().join(format!("ezmq-nisshi-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("the broker's folder");
        let mut broker = PrivateBroker {
            binary,
            dir,
            port,
            child: None,
        };
        broker.run();
        broker
    }

    /// The broker's URL.
    pub(crate) fn url(&self) -> String {
        format!("kafka://127.0.0.1:{}", self.port)
    }

    fn run(&mut self) {
        let listener = format!("tcp://127.0.0.1:{}", self.port);
        let child = std::process::Command::new(&self.binary)
            .current_dir(&self.dir)
            .args([
                "broker",
                "--listener-url",
                &listener,
                "--advertised-listener-url",
                &listener,
                "--storage-engine",
                "sqlite://kafka.db",
                "--group-initial-rebalance-delay",
                "0s",
                "--group-poll-interval",
                "100ms",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start nisshi");
        self.child = Some(child);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "nisshi did not listen on {} within 30 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills it (SIGKILL) and waits until the port is closed.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and storage.
    pub(crate) fn restart(&mut self) {
        self.kill();
        self.run();
    }
}

impl Drop for PrivateBroker {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
