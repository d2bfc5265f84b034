//! Helpers shared by the cluster test binaries: raw node connections, a
//! node's queue length, and the node a topic is routed to.

#![allow(dead_code)]

use ezmq_disque::{DisquePushOptions, MqClient, PushOptions};
use ezmq_test_support::TestCluster;

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
