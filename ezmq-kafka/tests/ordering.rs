//! Key-ordered delivery on the test broker ([`KafkaPushOptions::with_key`]):
//! a listener at concurrency 16 runs the jobs of one key one at a time, in
//! the order they were pushed, a failing one's retry included, while
//! different keys run at once.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ezmq_core::{ConsumeOptions, Job, MqClient, MqClientExt, PushOptions};
use ezmq_kafka::KafkaPushOptions;

/// Keys, and jobs per key.
const KEYS: usize = 4;
const PER_KEY: usize = 25;

/// What the handlers saw.
#[derive(Default)]
struct Seen {
    /// Per key, the sequence numbers in the order their runs started.
    started: Mutex<HashMap<String, Vec<usize>>>,
    /// Handlers running now, per key, and the most ever.
    running: Mutex<HashMap<String, usize>>,
    most_per_key: AtomicUsize,
    now: AtomicUsize,
    most: AtomicUsize,
    done: AtomicUsize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_runs_in_order_and_keys_run_at_once() {
    let prefix = support::prefix();
    let Some(client) = support::client(&prefix).await else {
        return;
    };
    let topic = "orders";
    for seq in 0..PER_KEY {
        for key in 0..KEYS {
            let options = PushOptions::new()
                .with_backend_options(KafkaPushOptions::new().with_key(format!("customer-{key}")));
            client
                .push_with(topic, format!("customer-{key}/{seq}").into(), options)
                .await
                .expect("a keyed push");
        }
    }
    let seen = Arc::new(Seen::default());
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let handler_seen = Arc::clone(&seen);
    client
        .add_consume_listener_with(
            topic,
            ConsumeOptions::new()
                .with_concurrency(16)
                .with_backoff(Duration::from_millis(50), Duration::from_millis(50)),
            move |job: Job| {
                let seen = Arc::clone(&handler_seen);
                let done_tx = done_tx.clone();
                async move {
                    let body = String::from_utf8_lossy(job.body()).into_owned();
                    let (key, seq) = body.split_once('/').expect("key/seq");
                    let seq: usize = seq.parse().expect("a sequence number");
                    let key = key.to_owned();
                    seen.started
                        .lock()
                        .expect("lock")
                        .entry(key.clone())
                        .or_default()
                        .push(seq);
                    {
                        let mut running = seen.running.lock().expect("lock");
                        let n = running.entry(key.clone()).or_default();
                        *n += 1;
                        seen.most_per_key.fetch_max(*n, Ordering::SeqCst);
                    }
                    let now = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
                    seen.most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    seen.now.fetch_sub(1, Ordering::SeqCst);
                    *seen.running.lock().expect("lock").entry(key).or_default() -= 1;
                    // The 10th job of each key fails once: its retry runs
                    // before the key's 11th.
                    if seq == 10 && job.attempt() == 1 {
                        return Err(std::io::Error::other("fails once"));
                    }
                    if seen.done.fetch_add(1, Ordering::SeqCst) + 1 == KEYS * PER_KEY {
                        let _ = done_tx.send(());
                    }
                    Ok(())
                }
            },
        )
        .await
        .expect("a listener");
    tokio::time::timeout(Duration::from_secs(60), done_rx.recv())
        .await
        .expect("every job done within 60 s")
        .expect("the handler's channel");

    let started = seen.started.lock().expect("lock").clone();
    for key in 0..KEYS {
        let key = format!("customer-{key}");
        let mut expected: Vec<usize> = (0..PER_KEY).collect();
        expected.insert(11, 10);
        assert_eq!(
            started.get(&key),
            Some(&expected),
            "{key}'s jobs in push order, the 10th's retry right after it"
        );
    }
    assert_eq!(
        seen.most_per_key.load(Ordering::SeqCst),
        1,
        "one job of a key at a time"
    );
    let most = seen.most.load(Ordering::SeqCst);
    assert!(most > 1, "different keys ran at once (at most {most} did)");
    println!("{KEYS} keys × {PER_KEY} jobs in order; at most {most} jobs at once");
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    support::delete_topics(&[&format!("{prefix}.q.{topic}")]).await;
}
