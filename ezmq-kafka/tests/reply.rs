//! Reply inboxes on the test broker: replies arrive (an expired one
//! does not), a closed inbox's topic is gone and a reply to it fails
//! without bringing it back, and an inbox whose client died is deleted
//! by the next client that opens one.

mod support;

use std::time::Duration;

use bytes::Bytes;
use ezmq_core::spi::ReplyChannel;
use ezmq_kafka::{KafkaBackend, KafkaConfig};
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};

async fn backend(prefix: &str) -> Option<KafkaBackend> {
    let config = KafkaConfig::new(support::url())
        .with_prefix(prefix)
        .with_connect_timeout(Duration::from_secs(3))
        .with_command_timeout(Duration::from_secs(3));
    support::backend(config).await
}

/// The broker's topics starting with `start`.
fn topics(start: &str) -> Vec<String> {
    let metadata = support::admin()
        .inner()
        .fetch_metadata(None, Duration::from_secs(5))
        .expect("metadata");
    metadata
        .topics()
        .iter()
        .map(|t| t.name().to_owned())
        .filter(|n| n.starts_with(start))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_arrive_and_a_closed_inbox_is_gone() {
    let prefix = support::prefix();
    let Some(requester) = backend(&prefix).await else {
        return;
    };
    let replier = backend(&prefix).await.expect("a second client");
    let inbox = requester.open_inbox().await.expect("an inbox");
    let address = inbox.address().to_owned();
    assert!(address.starts_with(&format!("{prefix}.r.")), "{address}");

    replier
        .send_reply(&address, Bytes::from_static(b"expired"), Duration::ZERO)
        .await
        .expect("a reply");
    for i in 0..3 {
        replier
            .send_reply(
                &address,
                format!("reply-{i}").into(),
                Duration::from_secs(60),
            )
            .await
            .expect("a reply");
    }
    let mut got = Vec::new();
    while got.len() < 3 {
        let replies = inbox
            .receive(10, Duration::from_secs(10))
            .await
            .expect("receive");
        assert!(!replies.is_empty(), "no reply within 10 s after {got:?}");
        got.extend(replies);
    }
    assert_eq!(got, ["reply-0", "reply-1", "reply-2"]);
    let more = inbox.receive(10, Duration::from_millis(300)).await.unwrap();
    assert!(more.is_empty(), "more replies: {more:?}");

    assert!(
        replier
            .send_reply("orders", Bytes::new(), Duration::from_secs(1))
            .await
            .is_err(),
        "a reply to a queue's name"
    );
    inbox.close().await.expect("close");
    assert!(
        topics(&address).is_empty(),
        "the inbox topic is still there"
    );
    let late = replier
        .send_reply(
            &address,
            Bytes::from_static(b"late"),
            Duration::from_secs(60),
        )
        .await;
    assert!(late.is_err(), "a reply to a closed inbox was stored");
    assert!(
        topics(&address).is_empty(),
        "a late reply created the inbox again"
    );
    support::close_and_clean(&[&requester, &replier], &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_clients_inbox_is_deleted_by_the_next_one_opened() {
    let prefix = support::prefix();
    let Some(client) = backend(&prefix).await else {
        return;
    };
    // What a client killed with its inbox open leaves: the topic, and
    // liveness claims that lapsed (here: none at all).
    let orphan = format!("{prefix}.r.{}", uuid::Uuid::new_v4().simple());
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(5)));
    support::admin()
        .create_topics(
            [&NewTopic::new(&orphan, 1, TopicReplication::Fixed(-1))],
            &options,
        )
        .await
        .expect("create the orphan")
        .into_iter()
        .for_each(|r| {
            r.expect("the orphan created");
        });
    assert_eq!(topics(&orphan), std::slice::from_ref(&orphan));

    let inbox = client.open_inbox().await.expect("an inbox");
    assert!(
        topics(&orphan).is_empty(),
        "the dead client's inbox is still there"
    );
    assert_eq!(topics(inbox.address()), [inbox.address().to_owned()]);

    // A live client's inbox is left alone.
    let other = backend(&prefix).await.expect("a second client");
    let second = other.open_inbox().await.expect("a second inbox");
    assert_eq!(topics(inbox.address()), [inbox.address().to_owned()]);
    for inbox in [inbox, second] {
        inbox.close().await.expect("close");
    }
    support::close_and_clean(&[&client, &other], &prefix).await;
}
