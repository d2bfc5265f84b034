//! The typed and operational conveniences of the listener API, on the
//! embedded server: typed listeners that see the delivery, shared state,
//! delayed JSON pushes, per-listener handler timeouts and lifecycle hooks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ezmq_disque::{
    ConsumeOptions, DeadLetterRecord, Job, ListenerHooks, MqClient, MqClientExt, PushOptions,
};
use ezmq_test_support::{init_tracing, TestBroker};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::time::timeout;

const SOON: Duration = Duration::from_secs(15);

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Charge {
    cents: u64,
}

async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    timeout(SOON, rx.recv())
        .await
        .expect("timed out waiting for an event")
        .expect("channel closed")
}

#[tokio::test]
async fn typed_listener_sees_the_delivery_and_state() {
    init_tracing();
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("typed");

    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_json_job_listener_with(&topic, ConsumeOptions::new(), move |c: Charge, job: Job| {
            let tx = tx.clone();
            async move {
                let tenant = job.headers().get("tenant").map(str::to_owned);
                let _ = tx.send((c, job.id().clone(), job.attempt(), tenant));
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    client
        .push_json_with(
            &topic,
            &Charge { cents: 990 },
            PushOptions::new()
                .with_header("tenant", "acme")
                .with_message_id("charge-1"),
        )
        .await
        .unwrap();
    let (charge, id, attempt, tenant) = recv(&mut rx).await;
    assert_eq!(charge, Charge { cents: 990 });
    assert_eq!(id.as_str(), "charge-1");
    assert_eq!(attempt, 1);
    assert_eq!(tenant.as_deref(), Some("acme"));

    // Shared state: the same Arc reaches every job, no clones in the closure.
    let seen = Arc::new(AtomicUsize::new(0));
    let stateful = broker.unique_topic("stateful");
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_stateful_listener_with(
            &stateful,
            ConsumeOptions::new(),
            (Arc::clone(&seen), tx),
            |(seen, tx): (Arc<AtomicUsize>, mpsc::UnboundedSender<usize>), _job: Job| async move {
                let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
                let _ = tx.send(n);
                Ok::<(), std::io::Error>(())
            },
        )
        .await
        .unwrap();
    for _ in 0..3 {
        client.push(&stateful, "x".into()).await.unwrap();
    }
    let mut counts = vec![
        recv(&mut rx).await,
        recv(&mut rx).await,
        recv(&mut rx).await,
    ];
    counts.sort_unstable();
    assert_eq!(counts, [1, 2, 3]);
    assert_eq!(seen.load(Ordering::SeqCst), 3);

    // A delayed JSON push is never early.
    let delayed = broker.unique_topic("json-delay");
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_json_listener(&delayed, move |c: Charge| {
            let tx = tx.clone();
            async move {
                let _ = tx.send((c, Instant::now()));
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    let start = Instant::now();
    client
        .push_json_delay(&delayed, &Charge { cents: 1 }, Duration::from_secs(1))
        .await
        .unwrap();
    let (charge, at) = recv(&mut rx).await;
    assert_eq!(charge.cents, 1);
    assert!(
        at - start + broker.clock_slack() >= Duration::from_secs(1),
        "{:?}",
        at - start
    );
    client.shutdown(Duration::from_secs(1)).await.unwrap();
}

#[tokio::test]
async fn handler_timeout_and_hooks() {
    init_tracing();
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("slow");
    let dead_topic = format!("{topic}.dead-letter");

    let retries: Arc<Mutex<Vec<(u32, String)>>> = Arc::default();
    let dead: Arc<Mutex<Vec<u32>>> = Arc::default();
    let hooks = {
        let (retries, dead) = (Arc::clone(&retries), Arc::clone(&dead));
        ListenerHooks::new()
            .on_retry(move |failed| {
                if let Ok(mut r) = retries.lock() {
                    r.push((failed.attempt, failed.error.to_owned()));
                }
            })
            .on_dead_letter(move |failed| {
                if let Ok(mut d) = dead.lock() {
                    d.push(failed.attempt);
                }
            })
    };
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new()
                .with_max_attempts(2)
                .with_backoff(Duration::from_millis(50), Duration::from_millis(50))
                .with_handler_timeout(Duration::from_millis(200))
                .with_hooks(hooks),
            |_job: Job| async {
                // Longer than the listener's handler timeout.
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok::<(), std::io::Error>(())
            },
        )
        .await
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_consume_listener(&dead_topic, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(DeadLetterRecord::from_job(&job));
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    client.push(&topic, "slow".into()).await.unwrap();
    let record = recv(&mut rx).await.expect("a dead-letter record");
    assert_eq!(record.attempts, 2);
    assert!(record.error.contains("timed out after"), "{}", record.error);
    let retries = retries.lock().unwrap().clone();
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(retries[0].0, 1);
    assert!(retries[0].1.contains("timed out"), "{retries:?}");
    assert_eq!(*dead.lock().unwrap(), [2]);
    client.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// Issue 13 item 3: a failing downstream must not make a listener hoard
/// jobs. Jobs waiting for their retry keep their concurrency slot, so the
/// listener never holds more than its concurrency; the rest stay queued
/// for other consumers.
#[tokio::test]
async fn failing_handlers_do_not_hoard_jobs() {
    init_tracing();
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("hoard");
    const JOBS: u64 = 50;
    const CONCURRENCY: usize = 4;
    for i in 0..JOBS {
        client.push(&topic, i.to_string().into()).await.unwrap();
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new()
                .with_concurrency(CONCURRENCY)
                .with_max_attempts(1_000)
                .with_backoff(Duration::from_millis(200), Duration::from_millis(400)),
            move |_job: Job| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(());
                    Err::<(), _>(std::io::Error::other("downstream is down"))
                }
            },
        )
        .await
        .unwrap();
    // Let it fail for a while: many attempts, each followed by a backoff.
    for _ in 0..20 {
        recv(&mut rx).await;
    }
    for _ in 0..10 {
        let queued = client.queue_len(&topic).await.unwrap();
        assert!(
            queued >= JOBS - CONCURRENCY as u64,
            "the listener holds {} jobs with a concurrency of {CONCURRENCY}",
            JOBS - queued
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client.shutdown(Duration::from_secs(1)).await.unwrap();
}
