//! Broadcast groups on the test broker: a new group gets what is
//! published after it was joined (not the topic's history), a group whose
//! members all left keeps its place and gets what was published
//! meanwhile, and a delayed broadcast reaches the group when due.

mod support;

use std::time::Duration;

use ezmq_core::spi::{Backend, FanOut, Source};
use ezmq_core::{PushOptions, Topic};
use ezmq_kafka::{KafkaBackend, KafkaConfig};

async fn backend(prefix: &str) -> Option<KafkaBackend> {
    let config = KafkaConfig::new(support::url())
        .with_prefix(prefix)
        .with_partitions(2)
        .with_connect_timeout(Duration::from_secs(3));
    support::backend(config).await
}

/// Receives (and acknowledges) from `source` until `want` bodies came;
/// every body received, in order.
async fn receive_until(backend: &KafkaBackend, source: &Source, want: &[&str]) -> Vec<String> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !want.iter().all(|w| got.iter().any(|g| g == w)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "waiting for {want:?}, got {got:?}"
        );
        let deliveries = backend
            .receive(source, 16, Duration::from_millis(500))
            .await
            .expect("receive");
        for delivery in deliveries {
            got.push(String::from_utf8_lossy(delivery.job.body()).into_owned());
            delivery.handle.ack().await.expect("ack");
        }
    }
    got
}

async fn publish(backend: &KafkaBackend, topic: &Topic, body: &'static str, options: PushOptions) {
    backend
        .publish_to_groups(topic, body.into(), &options)
        .await
        .expect("a broadcast");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_start_at_the_end_keep_their_place_and_get_delayed_broadcasts() {
    let prefix = support::prefix();
    let Some(first) = backend(&prefix).await else {
        return;
    };
    let topic = Topic::new("news").unwrap();
    let g1 = Topic::new("g1").unwrap();
    let source = Source::Group {
        topic: topic.clone(),
        group: g1.clone(),
    };
    publish(&first, &topic, "history", PushOptions::new()).await;
    first
        .join_group(&topic, &g1, Duration::from_secs(60))
        .await
        .expect("join g1");
    publish(&first, &topic, "after-join", PushOptions::new()).await;
    publish(
        &first,
        &topic,
        "delayed",
        PushOptions::new().with_delay(Duration::from_secs(1)),
    )
    .await;
    let got = receive_until(&first, &source, &["after-join", "delayed"]).await;
    assert!(
        !got.contains(&"history".to_owned()),
        "a new group got the history: {got:?}"
    );
    first.close().await.expect("close");

    // Nobody in g1 now; what is published meanwhile waits for it.
    let second = backend(&prefix).await.expect("a second client");
    publish(&second, &topic, "while-away", PushOptions::new()).await;
    second
        .join_group(&topic, &g1, Duration::from_secs(60))
        .await
        .expect("join g1 again");
    let got = receive_until(&second, &source, &["while-away"]).await;
    assert_eq!(got, ["while-away"], "g1 got again what it had: {got:?}");

    // A second group, new, gets only what comes after its join.
    let g2 = Topic::new("g2").unwrap();
    second
        .join_group(&topic, &g2, Duration::from_secs(60))
        .await
        .expect("join g2");
    publish(&second, &topic, "for-both", PushOptions::new()).await;
    let g2_source = Source::Group {
        topic: topic.clone(),
        group: g2,
    };
    let got = receive_until(&second, &g2_source, &["for-both"]).await;
    assert_eq!(got, ["for-both"]);
    let got = receive_until(&second, &source, &["for-both"]).await;
    assert_eq!(got, ["for-both"]);
    support::close_and_clean(&[&second], &prefix).await;
    support::delete_topics(&[&format!("{prefix}.b.news")]).await;
}
