//! A three-node JetStream cluster on loopback (three private
//! `nats-server` processes with routes, R3 streams): pushes and a
//! listener that go on while one node is killed and started again, losing
//! no acknowledged job.
//!
//! The shared behaviour suite runs on such a cluster too
//! (`behaviour_cluster.rs`).

mod support;

use std::collections::HashSet;
use std::time::Duration;

use ezmq_core::{ConsumeOptions, Job, MqClient, MqClientExt};
use ezmq_nats::NatsConfig;
use support::NatsCluster;
use tokio::sync::mpsc;

/// Jobs pushed before, while and after one node is down.
const PER_PHASE: usize = 100;
/// Bound for what should happen at once.
const SOON: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn no_acknowledged_job_is_lost_while_a_node_is_down() {
    let Some(cluster) = NatsCluster::start() else {
        return;
    };
    let config = NatsConfig::new(cluster.url())
        .with_prefix("ezmq_failover")
        .with_replicas(3);
    let client = support::connect_until_ready(config)
        .await
        .expect("a client of the cluster");
    let topic = format!("failover.{}", uuid::Uuid::new_v4().simple());
    let (tx, mut delivered) = mpsc::unbounded_channel::<String>();
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new().with_concurrency(16),
            move |job: Job| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(job.id().to_string());
                    Ok::<(), std::convert::Infallible>(())
                }
            },
        )
        .await
        .expect("listener");

    let mut acknowledged = HashSet::new();
    let mut failed = 0usize;
    for phase in 0..3 {
        if phase == 1 {
            cluster.nodes[0].kill();
        }
        if phase == 2 {
            cluster.nodes[0].start().expect("the node starts again");
        }
        for n in 0..PER_PHASE {
            match client.push(&topic, format!("{phase}-{n}").into()).await {
                Ok(id) => {
                    acknowledged.insert(id.to_string());
                }
                // A push that failed while the cluster moved its leaders
                // is the caller's to retry; only confirmed ones count.
                Err(err) => {
                    failed += 1;
                    eprintln!("push {phase}-{n} failed: {err}");
                }
            }
        }
    }
    assert!(
        acknowledged.len() >= PER_PHASE * 2,
        "most pushes are confirmed with a node down ({} of {}, {failed} failed)",
        acknowledged.len(),
        PER_PHASE * 3
    );
    let mut seen = HashSet::new();
    while !acknowledged.is_subset(&seen) {
        let id = tokio::time::timeout(SOON, delivered.recv())
            .await
            .unwrap_or_else(|_| {
                let missing = acknowledged.difference(&seen).count();
                panic!("{missing} acknowledged jobs were not delivered")
            })
            .expect("the listener runs");
        seen.insert(id);
    }
    eprintln!(
        "{} confirmed pushes, {failed} failed while the cluster moved its leaders; every confirmed job delivered",
        acknowledged.len()
    );
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
