//! A broker restart (SIGKILL, then the same storage on the same port)
//! under a running listener: jobs confirmed before it are still there
//! after it, and the listener resumes without being restarted.
//!
//! It runs a private nisshi (`EZMQ_NISSHI`, or the one `.ci/run` caches
//! in `~/.cache/ezmq/nisshi-0.8.1`).

mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ezmq_core::{Job, MqClient, MqClientExt};
use ezmq_kafka::KafkaConfig;
use tokio::sync::mpsc;

/// Bound for a delivery once the broker is back.
const SOON: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn a_listener_resumes_after_a_broker_restart_and_confirmed_jobs_survive() {
    let Some(binary) = support::nisshi_binary() else {
        ezmq_test_support::skip_or_require(
            "kafka",
            "a private nisshi",
            &"no nisshi binary (EZMQ_NISSHI, ~/.cache/ezmq/nisshi-0.8.1)",
        );
        return;
    };
    let mut broker = support::PrivateBroker::start(binary);
    let config = KafkaConfig::new(broker.url())
        .with_prefix("ezmq-restart")
        .with_partitions(2)
        .with_session_timeout(Duration::from_secs(3))
        .with_command_timeout(Duration::from_secs(10));
    let client = ezmq_kafka::connect(config.clone())
        .await
        .expect("connect to the private broker");
    let (tx, mut got) = mpsc::unbounded_channel::<String>();
    client
        .add_consume_listener("live", move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(String::from_utf8_lossy(job.body()).into_owned());
                Ok::<(), std::convert::Infallible>(())
            }
        })
        .await
        .expect("listener");
    client
        .push("live", "before".into())
        .await
        .expect("push before");
    let first = tokio::time::timeout(SOON, got.recv())
        .await
        .expect("the first job");
    assert_eq!(first.as_deref(), Some("before"));
    // Confirmed, never consumed: they must survive the restart.
    for n in 0..5 {
        client
            .push("kept", format!("kept {n}").into())
            .await
            .expect("push a job to keep");
    }

    broker.restart();
    let back = Instant::now();

    // A push right after the restart may find the connection still
    // broken: the caller retries, as a service would.
    let deadline = Instant::now() + SOON;
    loop {
        match client.push("live", "after".into()).await {
            Ok(_) => break,
            Err(err) => {
                assert!(
                    Instant::now() < deadline,
                    "no push stored within {SOON:?} of the restart: {err}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let after = tokio::time::timeout(SOON, got.recv())
        .await
        .expect("the listener resumes after the restart");
    assert_eq!(after.as_deref(), Some("after"));
    eprintln!("delivered {:?} after the broker was back", back.elapsed());

    let (kept_tx, mut kept) = mpsc::unbounded_channel::<String>();
    client
        .add_consume_listener("kept", move |job: Job| {
            let tx = kept_tx.clone();
            async move {
                let _ = tx.send(String::from_utf8_lossy(job.body()).into_owned());
                Ok::<(), std::convert::Infallible>(())
            }
        })
        .await
        .expect("second listener");
    let mut seen = HashSet::new();
    while seen.len() < 5 {
        let body = tokio::time::timeout(SOON, kept.recv())
            .await
            .expect("every confirmed job survives the restart")
            .expect("the listener runs");
        seen.insert(body);
    }
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
