//! The `ezmq.queue.depth` gauge on every backend: a listener samples its
//! topic's queue length while its handler holds the only slot and four
//! messages wait behind it.

use std::time::Duration;

use ezmq::prelude::*;
use ezmq::telemetry::names;
use ezmq::{ConsumeOptions, Job};
use ezmq_disque_server::{EmbeddedDisque, ServerConfig};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;
use tokio::sync::{mpsc, Semaphore};

mod support;
use support::connect;

const BOUND: Duration = Duration::from_secs(20);

async fn check(url: &str, backend: &str) {
    let recorder = DebuggingRecorder::new();
    let snapshots = recorder.snapshotter();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let Some(client) = connect(url, backend).await else {
        return;
    };
    let topic = format!("depth-{}", uuid::Uuid::new_v4().simple());
    for i in 0..5 {
        client
            .push(&topic, format!("m{i}").into())
            .await
            .expect("push");
    }
    let gate = std::sync::Arc::new(Semaphore::new(0));
    let (started, mut started_rx) = mpsc::unbounded_channel();
    let held = std::sync::Arc::clone(&gate);
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new()
                .with_concurrency(1)
                .with_queue_depth_every(Some(Duration::from_millis(50))),
            move |_job: Job| {
                let gate = std::sync::Arc::clone(&held);
                let started = started.clone();
                async move {
                    let _ = started.send(());
                    let _permit = gate.acquire().await;
                    Ok::<(), std::io::Error>(())
                }
            },
        )
        .await
        .expect("listener");
    tokio::time::timeout(BOUND, started_rx.recv())
        .await
        .expect("the first job started");

    // One job in the handler, four waiting: the gauge reaches 4.
    let labels = [(names::DESTINATION, topic.as_str())];
    let depth = || {
        snapshots
            .snapshot()
            .into_vec()
            .into_iter()
            .find(|(key, _, _, _)| {
                key.kind() == MetricKind::Gauge
                    && key.key().name() == names::QUEUE_DEPTH
                    && labels
                        .iter()
                        .all(|(k, v)| key.key().labels().any(|l| l.key() == *k && l.value() == *v))
            })
            .and_then(|(_, _, _, value)| match value {
                DebugValue::Gauge(v) => Some(v.into_inner()),
                _ => None,
            })
    };
    let deadline = tokio::time::Instant::now() + BOUND;
    let mut last = None;
    while tokio::time::Instant::now() < deadline {
        last = depth();
        if last == Some(4.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(last, Some(4.0), "{backend}: queue depth gauge");

    // Every job done: the gauge comes down to 0.
    gate.add_permits(5);
    let deadline = tokio::time::Instant::now() + BOUND;
    while tokio::time::Instant::now() < deadline {
        last = depth();
        if last == Some(0.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(last, Some(0.0), "{backend}: queue depth gauge once drained");
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

#[tokio::test(flavor = "current_thread")]
async fn disque_embedded_samples_queue_depth() {
    let server = EmbeddedDisque::start(ServerConfig::default().with_port(0))
        .await
        .expect("embedded server");
    check(&format!("disque://{}", server.addr()), "disque").await;
}

#[tokio::test(flavor = "current_thread")]
async fn redis_samples_queue_depth() {
    let url =
        std::env::var("EZMQ_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    check(&url, "redis").await;
}

#[tokio::test(flavor = "current_thread")]
async fn rabbitmq_samples_queue_depth() {
    let url = std::env::var("EZMQ_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    check(&url, "rabbitmq").await;
}
