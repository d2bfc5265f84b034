//! Delayed jobs through the delay levels on the test broker: waits that
//! pass several levels arrive never early and soon after their time, and
//! jobs pushed by a client that closed before they were due are moved by
//! another client's mover.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ezmq_core::{Client, ConsumeOptions, Job, MqClient, MqClientExt, PushOptions};
use tokio::sync::mpsc;

/// How late a delivery may be (generous: the broker shares two cores).
const LATE_BOUND: Duration = Duration::from_secs(3);

/// A listener on `topic` sending each job's body and arrival here.
async fn arrivals(client: &Client, topic: &str) -> mpsc::UnboundedReceiver<(String, Instant)> {
    let (tx, rx) = mpsc::unbounded_channel();
    client
        .add_consume_listener_with(
            topic,
            ConsumeOptions::default().with_concurrency(16),
            move |job: Job| {
                let tx = tx.clone();
                async move {
                    let body = String::from_utf8_lossy(job.body()).into_owned();
                    let _ = tx.send((body, Instant::now()));
                    Ok::<(), std::convert::Infallible>(())
                }
            },
        )
        .await
        .expect("a listener");
    rx
}

/// Waits for `n` distinct bodies; each one's first arrival.
async fn first_arrivals(
    rx: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    n: usize,
    within: Duration,
) -> HashMap<String, Instant> {
    let mut seen = HashMap::new();
    let deadline = tokio::time::Instant::now() + within;
    while seen.len() < n {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some((body, at))) => {
                seen.entry(body).or_insert(at);
            }
            _ => panic!(
                "{} of {n} delayed jobs arrived within {within:?}",
                seen.len()
            ),
        }
    }
    seen
}

fn level_topics(prefix: &str) -> Vec<String> {
    (0..18)
        .map(|k| format!("{prefix}.d.{}", 1u64 << k))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_across_levels_end_never_early_and_soon_after() {
    let prefix = support::prefix();
    let Some(client) = support::client(&prefix).await else {
        return;
    };
    let topic = "delays";
    let mut rx = arrivals(&client, topic).await;
    // 0.3 s to 7.1 s: level 0 alone, and waits through levels 2, 1 and 0.
    let delays: Vec<Duration> = (0..40)
        .map(|i| Duration::from_millis(300 + i * 170))
        .collect();
    let mut due = HashMap::new();
    for (i, delay) in delays.iter().enumerate() {
        let pushed = Instant::now();
        client
            .push_with(
                topic,
                format!("job-{i}").into(),
                PushOptions::new().with_delay(*delay),
            )
            .await
            .expect("a delayed push");
        due.insert(format!("job-{i}"), pushed + *delay);
    }
    let arrived = first_arrivals(&mut rx, delays.len(), Duration::from_secs(30)).await;
    let mut late = Vec::new();
    for (body, at) in &arrived {
        let due = due[body];
        assert!(*at >= due, "{body} arrived {:?} early", due - *at);
        late.push(*at - due);
    }
    late.sort();
    let (median, max) = (late[late.len() / 2], late[late.len() - 1]);
    println!("40 delayed jobs (0.3–7 s): late by median {median:?}, at most {max:?}");
    assert!(max < LATE_BOUND, "a delayed job arrived {max:?} late");
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    let queue = format!("{prefix}.q.{topic}");
    let mut topics = level_topics(&prefix);
    topics.push(queue);
    support::delete_topics(&topics.iter().map(String::as_str).collect::<Vec<_>>()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_delayed_by_a_client_that_closed_are_moved_by_another() {
    let prefix = support::prefix();
    let Some(producer) = support::client(&prefix).await else {
        return;
    };
    let topic = "outlived";
    let delay = Duration::from_secs(3);
    let pushed = Instant::now();
    for i in 0..20 {
        producer
            .push_with(
                topic,
                format!("job-{i}").into(),
                PushOptions::new().with_delay(delay),
            )
            .await
            .expect("a delayed push");
    }
    producer
        .shutdown(Duration::from_secs(5))
        .await
        .expect("the producer closes");

    let consumer = support::client(&prefix)
        .await
        .expect("the consumer connects");
    let mut rx = arrivals(&consumer, topic).await;
    let arrived = first_arrivals(&mut rx, 20, Duration::from_secs(30)).await;
    for (body, at) in &arrived {
        assert!(
            *at >= pushed + delay,
            "{body} arrived before its delay ended"
        );
    }
    consumer
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    let mut topics = level_topics(&prefix);
    topics.push(format!("{prefix}.q.{topic}"));
    support::delete_topics(&topics.iter().map(String::as_str).collect::<Vec<_>>()).await;
}
