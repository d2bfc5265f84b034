//! The Kafka test broker (`EZMQ_TEST_KAFKA_URL`, default
//! `kafka://127.0.0.1:9092`, where `.ci/run` starts nisshi), a prefix of
//! this run's own, and the cleanup of the topics a test made.

#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ezmq_kafka::{KafkaCluster, KafkaConfig};
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

/// A connected cluster handle with a fresh prefix, or `None` after the
/// skip line (a panic when Kafka is required).
pub(crate) async fn cluster() -> Option<KafkaCluster> {
    let config = KafkaConfig::new(url())
        .with_prefix(prefix())
        .with_partitions(3)
        .with_connect_timeout(Duration::from_secs(3));
    match KafkaCluster::connect(config).await {
        Ok(cluster) => Some(cluster),
        Err(err) if err.is_connection_error() => {
            ezmq_test_support::skip_or_require("kafka", &url(), &err);
            None
        }
        Err(err) => panic!("connecting to {}: {err}", url()),
    }
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
