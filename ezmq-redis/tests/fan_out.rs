//! Broadcast groups on the real Redis at EZMQ_TEST_REDIS_URL.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ezmq_core::spi::{GroupMembership, Source};
use ezmq_core::{handler_fn, Client, ConsumeOptions, Job, MqClient, PushOptions, Topic};
use tokio::sync::mpsc;
use tokio::time::timeout;

type Seen = mpsc::UnboundedSender<(String, String)>;

/// Joins `group` on `topic` with `client` and listens, reporting
/// `(group, body)` for every job handled.
async fn member(client: &Client, topic: &Topic, group: &str, tx: Seen) -> Box<dyn GroupMembership> {
    let group = Topic::new(group).unwrap();
    let membership = client
        .runtime()
        .fan_out()
        .unwrap()
        .join_group(topic, &group, Duration::from_secs(60))
        .await
        .unwrap();
    let name = group.to_string();
    let handler = handler_fn(move |job: Job| {
        let tx = tx.clone();
        let name = name.clone();
        async move {
            let _ = tx.send((name, String::from_utf8_lossy(job.body()).into_owned()));
            Ok::<(), std::io::Error>(())
        }
    });
    client
        .runtime()
        .listen(
            Source::Group {
                topic: topic.clone(),
                group,
            },
            Arc::new(handler),
            ConsumeOptions::new(),
        )
        .unwrap();
    membership
}

#[tokio::test]
async fn every_group_gets_every_message_once_and_late_groups_start_at_join() {
    let Some(config) = support::config().await else {
        return;
    };
    let topic = Topic::new(support::topic("bcast")).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut clients = Vec::new();
    let mut memberships = Vec::new();
    for group in ["billing", "billing", "audit", "audit"] {
        let client = support::client(&config).await;
        memberships.push(member(&client, &topic, group, tx.clone()).await);
        clients.push(client);
    }
    let fan_out = clients[0].runtime().fan_out().unwrap();
    const N: usize = 20;
    for i in 0..N {
        let reached = fan_out
            .publish_to_groups(&topic, format!("m{i}").into(), &PushOptions::new())
            .await
            .unwrap();
        assert_eq!(reached, Some(2));
    }
    let mut counts: HashMap<(String, String), usize> = HashMap::new();
    for _ in 0..2 * N {
        let seen = timeout(Duration::from_secs(15), rx.recv())
            .await
            .unwrap()
            .unwrap();
        *counts.entry(seen).or_default() += 1;
    }
    assert!(timeout(Duration::from_millis(500), rx.recv())
        .await
        .is_err());
    assert_eq!(counts.len(), 2 * N);
    assert!(counts.values().all(|c| *c == 1), "{counts:?}");

    // A group that joins now sees only what is published from now on.
    let late = support::client(&config).await;
    memberships.push(member(&late, &topic, "late", tx.clone()).await);
    memberships[0].refresh().await.unwrap();
    let reached = fan_out
        .publish_to_groups(&topic, "after".into(), &PushOptions::new())
        .await
        .unwrap();
    assert_eq!(reached, Some(3));
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(
            timeout(Duration::from_secs(15), rx.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    got.sort();
    assert_eq!(
        got,
        [
            ("audit".to_owned(), "after".to_owned()),
            ("billing".to_owned(), "after".to_owned()),
            ("late".to_owned(), "after".to_owned()),
        ]
    );
    for m in &memberships {
        m.leave().await.unwrap();
    }
    for client in clients.into_iter().chain([late]) {
        client.shutdown(Duration::from_secs(5)).await.unwrap();
    }
}

#[tokio::test]
async fn delayed_broadcast_and_group_retry() {
    let Some(config) = support::config().await else {
        return;
    };
    let topic = Topic::new(support::topic("bcast-delay")).unwrap();
    let client = support::client(&config).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _m = member(&client, &topic, "g", tx).await;
    // Also a failing group member: its retries stay within its group.
    let failing = support::client(&config).await;
    let group = Topic::new("flaky").unwrap();
    let _f = failing
        .runtime()
        .fan_out()
        .unwrap()
        .join_group(&topic, &group, Duration::from_secs(60))
        .await
        .unwrap();
    let (atx, mut arx) = mpsc::unbounded_channel::<u32>();
    failing
        .runtime()
        .listen(
            Source::Group {
                topic: topic.clone(),
                group,
            },
            Arc::new(handler_fn(move |job: Job| {
                let atx = atx.clone();
                async move {
                    let _ = atx.send(job.attempt());
                    if job.attempt() < 3 {
                        Err(std::io::Error::other("not yet"))
                    } else {
                        Ok(())
                    }
                }
            })),
            ConsumeOptions::new()
                .with_backoff(Duration::from_millis(100), Duration::from_millis(200)),
        )
        .unwrap();
    let start = std::time::Instant::now();
    let reached = client
        .runtime()
        .fan_out()
        .unwrap()
        .publish_to_groups(
            &topic,
            "soon".into(),
            &PushOptions::new().with_delay(Duration::from_millis(700)),
        )
        .await
        .unwrap();
    assert_eq!(reached, Some(2));
    let (_, body) = timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(body, "soon");
    assert!(start.elapsed() >= Duration::from_millis(700));
    let mut attempts = Vec::new();
    for _ in 0..3 {
        attempts.push(
            timeout(Duration::from_secs(10), arx.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert_eq!(attempts, [1, 2, 3]);
    assert!(
        timeout(Duration::from_millis(500), rx.recv())
            .await
            .is_err(),
        "other group got it once"
    );
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    failing.shutdown(Duration::from_secs(5)).await.unwrap();
}
