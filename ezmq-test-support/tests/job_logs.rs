//! What a `RUST_LOG=warn` reader sees of a job: every WARN and ERROR event
//! about one names its topic, message id and attempt itself (the INFO
//! `process` span that also has them is filtered out at WARN).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ezmq_core::{Client, ClientConfig, ConsumeOptions, Job, JobId, MqClient, MqClientExt};
use ezmq_test_support::{LogCapture, MemoryBroker};
use tokio::sync::{mpsc, Notify};

/// Waits up to 10 s for `what` on `rx`.
async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>, what: &str) -> T {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap_or_else(|_| panic!("{what} within 10 s"))
        .unwrap_or_else(|| panic!("{what}: channel closed"))
}

/// The WARN/ERROR event lines containing `needle`.
fn events_with(logs: &LogCapture, needle: &str) -> Vec<String> {
    logs.lines()
        .into_iter()
        .filter(|line| line.starts_with("event ") && line.contains(needle))
        .collect()
}

/// Asserts `line` names `topic`, `id` and an attempt.
fn assert_job_fields(line: &str, topic: &str, id: &JobId) {
    assert!(
        line.contains(&format!(" topic={topic}")),
        "no topic: {line}"
    );
    assert!(
        line.contains(&format!(" message_id={id}")),
        "no message id: {line}"
    );
    assert!(line.contains(" attempt="), "no attempt: {line}");
}

#[tokio::test]
async fn warnings_about_a_job_name_its_topic_message_id_and_attempt() {
    let logs = LogCapture::new();
    let _default = logs.set_default_at(tracing::Level::WARN);
    let broker = MemoryBroker::new();
    let client = Client::new(broker.backend(), ClientConfig::default());
    let fast =
        ConsumeOptions::new().with_backoff(Duration::from_millis(10), Duration::from_millis(20));

    // Fails its first attempt, then succeeds: one retry.
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let retried = client
        .add_consume_listener_with("logs-retry", fast.clone(), move |job: Job| {
            let done_tx = done_tx.clone();
            async move {
                if job.attempt() == 1 {
                    return Err(std::io::Error::other("downstream is down"));
                }
                let _ = done_tx.send(job.attempt());
                Ok(())
            }
        })
        .await
        .expect("retry listener");
    let retry_id = client.push("logs-retry", "a".into()).await.expect("push");
    assert_eq!(recv(&mut done, "the retried attempt").await, 2);

    // Fails every time: dead-lettered after its one attempt.
    let failures = Arc::new(AtomicU32::new(0));
    let dead = {
        let failures = Arc::clone(&failures);
        client
            .add_consume_listener_with(
                "logs-dead",
                fast.clone().with_max_attempts(1),
                move |_job: Job| {
                    failures.fetch_add(1, Ordering::SeqCst);
                    async { Err::<(), _>(std::io::Error::other("bad input")) }
                },
            )
            .await
            .expect("dead-letter listener")
    };
    let dead_id = client.push("logs-dead", "b".into()).await.expect("push");
    let (dl_tx, mut dl) = mpsc::unbounded_channel();
    let dead_letters = client
        .add_consume_listener("logs-dead.dead-letter", move |job: Job| {
            let dl_tx = dl_tx.clone();
            async move {
                let _ = dl_tx.send(job.id().clone());
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .expect("dead-letter reader");
    assert_eq!(recv(&mut dl, "the dead letter").await, dead_id);

    // Outlives the stop's grace period: aborted.
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let never = Arc::new(Notify::new());
    let slow = {
        let never = Arc::clone(&never);
        client
            .add_consume_listener_with("logs-slow", fast, move |_job: Job| {
                let (started_tx, never) = (started_tx.clone(), Arc::clone(&never));
                async move {
                    let _ = started_tx.send(());
                    never.notified().await;
                    Ok::<(), std::io::Error>(())
                }
            })
            .await
            .expect("slow listener")
    };
    let slow_id = client.push("logs-slow", "c".into()).await.expect("push");
    recv(&mut started, "the slow handler").await;
    slow.stop(Duration::from_millis(50)).await;

    for listener in [retried, dead, dead_letters] {
        listener.stop(Duration::from_secs(5)).await;
    }
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");

    let retry = events_with(&logs, "will retry");
    assert_eq!(retry.len(), 1, "{retry:?}");
    assert_job_fields(&retry[0], "logs-retry", &retry_id);
    assert!(retry[0].contains(" attempt=1"), "{}", retry[0]);
    let moved = events_with(&logs, "moved to the dead-letter topic");
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_job_fields(&moved[0], "logs-dead", &dead_id);
    let aborted = events_with(&logs, "shutdown grace period");
    assert_eq!(aborted.len(), 1, "{aborted:?}");
    assert_job_fields(&aborted[0], "logs-slow", &slow_id);
    // And nothing else at WARN or above lacks them.
    for line in logs.lines().into_iter().filter(|l| l.starts_with("event ")) {
        let (topic, id) = [
            ("logs-retry", &retry_id),
            ("logs-dead", &dead_id),
            ("logs-slow", &slow_id),
        ]
        .into_iter()
        .find(|(topic, _)| line.contains(&format!(" topic={topic} ")))
        .unwrap_or_else(|| panic!("a warning about no job of this test: {line}"));
        assert_job_fields(&line, topic, id);
    }
    assert_eq!(failures.load(Ordering::SeqCst), 1);
}
