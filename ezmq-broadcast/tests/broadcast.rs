//! Broadcast over real TCP against the test broker (embedded Disque unless
//! `EZMQ_TEST_DISQUE_ADDRS` names external nodes).

mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ezmq_broadcast::{BroadcastConfig, BroadcastExt};
use ezmq_core::{handler_fn, Client, ClientConfig, ConsumeOptions, Error, Job, MqClient};
use ezmq_disque::DisqueBackend;
use ezmq_test_support::{eventually, init_tracing, TestBroker};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::time::Instant;

use support::{add_member, assert_quiet, client_with, next, shutdown_all, PATIENCE};

const BROADCASTS: usize = 1_000;

/// A little over the Disque backend's discovery interval (1 s): how long a
/// producer on another client may take to see a new group.
const DISCOVERY: Duration = Duration::from_millis(1_200);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_group_gets_every_broadcast_exactly_once() {
    init_tracing();
    let broker = TestBroker::start().await;
    let topic = broker.unique_topic("bc-fanout");
    let config = BroadcastConfig::new();
    let (tx, mut rx) = mpsc::unbounded_channel();

    let mut members = Vec::new();
    for (group, member) in [("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2")] {
        let client = client_with(&broker, config.clone()).await;
        let options = ConsumeOptions::new().with_concurrency(4);
        add_member(
            &client,
            &topic,
            group,
            member,
            options,
            Duration::from_millis(1),
            tx.clone(),
        )
        .await;
        members.push(client);
    }
    let producer = client_with(&broker, config).await;

    let receipts: Vec<_> = futures::stream::iter(0..BROADCASTS)
        .map(|i| {
            let producer = producer.clone();
            let topic = topic.clone();
            async move { producer.push_broadcast(&topic, i.to_string().into()).await }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for receipt in receipts {
        let receipt = receipt.expect("broadcast stored");
        assert_eq!(receipt.group_count(), Some(2));
    }

    // group -> body -> deliveries; member -> deliveries
    let mut seen: HashMap<String, HashMap<String, usize>> = HashMap::new();
    let mut per_member: BTreeMap<String, usize> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let complete = |seen: &HashMap<String, HashMap<String, usize>>| {
        ["a", "b"]
            .iter()
            .all(|g| seen.get(*g).is_some_and(|m| m.len() == BROADCASTS))
    };
    while !complete(&seen) {
        let d = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("all broadcasts delivered in time")
            .expect("channel open");
        *seen.entry(d.group).or_default().entry(d.body).or_default() += 1;
        *per_member.entry(d.member).or_default() += 1;
    }
    // Nothing left over: a duplicate would arrive here.
    assert_quiet(&mut rx, Duration::from_millis(500)).await;

    for group in ["a", "b"] {
        let dups: Vec<_> = seen[group].iter().filter(|(_, n)| **n != 1).collect();
        assert!(dups.is_empty(), "group {group} got duplicates: {dups:?}");
        for i in 0..BROADCASTS {
            assert!(
                seen[group].contains_key(&i.to_string()),
                "group {group} missed {i}"
            );
        }
    }
    for member in ["a1", "a2", "b1", "b2"] {
        assert!(
            per_member.get(member).copied().unwrap_or(0) >= 1,
            "member {member} got nothing: {per_member:?}"
        );
    }
    let refs: Vec<&Client> = members.iter().chain([&producer]).collect();
    shutdown_all(&refs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_broadcast_arrives_no_earlier_than_its_delay() {
    init_tracing();
    let broker = TestBroker::start().await;
    let topic = broker.unique_topic("bc-delay");
    let client = client_with(&broker, BroadcastConfig::new()).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    add_member(
        &client,
        &topic,
        "g",
        "m",
        ConsumeOptions::new(),
        Duration::ZERO,
        tx,
    )
    .await;

    let delay = Duration::from_secs(2);
    let pushed_at = Instant::now();
    let receipt = client
        .push_broadcast_delay(&topic, "later".into(), delay)
        .await
        .expect("delayed broadcast stored");
    assert_eq!(receipt.group_count(), Some(1));
    let d = next(&mut rx).await;
    let elapsed = pushed_at.elapsed();
    assert_eq!(d.body, "later");
    assert!(
        elapsed + broker.clock_slack() >= delay,
        "delivered after {elapsed:?}, before the delay"
    );
    assert!(
        elapsed < delay + Duration::from_secs(10),
        "delivered only after {elapsed:?}"
    );

    // The typed form: JSON, same delay rule.
    let pushed_at = Instant::now();
    client
        .push_broadcast_json_delay(&topic, &Note { n: 7 }, Duration::from_secs(1))
        .await
        .expect("delayed JSON broadcast stored");
    let d = next(&mut rx).await;
    assert_eq!(d.body, r#"{"n":7}"#);
    assert!(
        pushed_at.elapsed() + broker.clock_slack() >= Duration::from_secs(1),
        "delivered after {:?}, before the delay",
        pushed_at.elapsed()
    );
    shutdown_all(&[&client]).await;
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Note {
    n: u32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_groups_registered_before_a_broadcast_receive_it() {
    init_tracing();
    let broker = TestBroker::start().await;
    let topic = broker.unique_topic("bc-join");
    // Members on their own clients.
    let producer = client_with(&broker, BroadcastConfig::new()).await;
    let early_client = client_with(&broker, BroadcastConfig::new()).await;
    let late_client = client_with(&broker, BroadcastConfig::new()).await;

    let (early_tx, mut early_rx) = mpsc::unbounded_channel();
    let (late_tx, mut late_rx) = mpsc::unbounded_channel();
    let json_member = |tx: mpsc::UnboundedSender<Note>| {
        move |note: Note| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(note);
                Ok::<(), std::convert::Infallible>(())
            }
        }
    };

    // Nobody subscribed yet: nothing stored, not an error.
    let receipt = producer
        .push_broadcast_json(&topic, &Note { n: 0 })
        .await
        .unwrap();
    assert!(receipt.is_empty());

    early_client
        .add_broadcast_json_listener(&topic, "early", json_member(early_tx))
        .await
        .unwrap();
    // The producer's backend may cache the group list for its discovery
    // interval (Disque: 1 s); this waits out that documented bound.
    tokio::time::sleep(DISCOVERY).await;
    let first = producer
        .push_broadcast_json(&topic, &Note { n: 1 })
        .await
        .unwrap();
    assert_eq!(first.group_count(), Some(1));

    late_client
        .add_broadcast_json_listener(&topic, "late", json_member(late_tx))
        .await
        .unwrap();
    tokio::time::sleep(DISCOVERY).await;
    let second = producer
        .push_broadcast_json(&topic, &Note { n: 2 })
        .await
        .unwrap();
    assert_eq!(second.group_count(), Some(2));

    let mut early = vec![
        recv_note(&mut early_rx).await,
        recv_note(&mut early_rx).await,
    ];
    early.sort_by_key(|n| n.n);
    assert_eq!(early, [Note { n: 1 }, Note { n: 2 }]);
    assert_eq!(recv_note(&mut late_rx).await, Note { n: 2 });
    // The first broadcast was never stored for "late".
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(late_rx.try_recv().is_err());

    shutdown_all(&[&producer, &early_client, &late_client]).await;
}

async fn recv_note(rx: &mut mpsc::UnboundedReceiver<Note>) -> Note {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("a note within the patience")
        .expect("channel open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_members_are_seen_at_once_others_soon() {
    init_tracing();
    let broker = TestBroker::start().await;
    let topic = broker.unique_topic("bc-cache");
    let client = client_with(&broker, BroadcastConfig::new()).await;
    let other = client_with(&broker, BroadcastConfig::new()).await;

    // Both read (and may cache) the empty group list.
    for c in [&client, &other] {
        assert!(c
            .push_broadcast(&topic, "x".into())
            .await
            .unwrap()
            .is_empty());
    }

    let (tx, mut rx) = mpsc::unbounded_channel();
    add_member(
        &client,
        &topic,
        "g",
        "m",
        ConsumeOptions::new(),
        Duration::ZERO,
        tx,
    )
    .await;
    // The client that added the member sees it at once ...
    let receipt = client.push_broadcast(&topic, "own".into()).await.unwrap();
    assert_eq!(receipt.group_count(), Some(1));
    assert_eq!(next(&mut rx).await.body, "own");
    // ... another client within the discovery interval (a push that finds
    // no group stores nothing, so trying again is harmless).
    let seen = eventually(Duration::from_secs(10), || {
        let other = other.clone();
        let topic = topic.clone();
        async move {
            other
                .push_broadcast(&topic, "other".into())
                .await
                .unwrap()
                .group_count()
                == Some(1)
        }
    })
    .await;
    assert!(seen, "the other client never saw the group");
    assert_eq!(next(&mut rx).await.body, "other");
    assert_quiet(&mut rx, Duration::from_millis(300)).await;

    shutdown_all(&[&client, &other]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_without_members_is_dropped_after_the_retention() {
    init_tracing();
    let broker = TestBroker::start().await;
    let topic = broker.unique_topic("bc-retention");
    let retention = Duration::from_secs(2);
    let config = BroadcastConfig::new().with_retention(retention);
    let gone_client = client_with(&broker, config.clone()).await;
    // The producer is the client of the live member: its own join makes it
    // read the group list afresh.
    let producer = client_with(&broker, config.clone()).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let gone = add_member(
        &gone_client,
        &topic,
        "gone",
        "g1",
        ConsumeOptions::new(),
        Duration::ZERO,
        tx.clone(),
    )
    .await;
    add_member(
        &producer,
        &topic,
        "stay",
        "s1",
        ConsumeOptions::new(),
        Duration::ZERO,
        tx,
    )
    .await;

    let stopped_at = Instant::now();
    gone.stop(Duration::from_secs(1)).await;
    assert!(gone.is_finished());

    // Still in fan-out right after its last member stopped: the copy waits.
    let receipt = producer
        .push_broadcast(&topic, "while-down".into())
        .await
        .unwrap();
    assert_eq!(receipt.group_count(), Some(2));
    assert_eq!(next(&mut rx).await.body, "while-down");

    // Dropped from fan-out once its last refresh expired.
    let dropped = eventually(Duration::from_secs(15), || {
        let producer = producer.clone();
        let topic = topic.clone();
        async move {
            producer
                .push_broadcast(&topic, "probe".into())
                .await
                .unwrap()
                .group_count()
                == Some(1)
        }
    })
    .await;
    let elapsed = stopped_at.elapsed();
    assert!(
        dropped,
        "group still in fan-out {elapsed:?} after its members stopped"
    );
    // Its last refresh was at most one refresh interval old.
    let lower = (retention - config.refresh_interval() - Duration::from_millis(100))
        .saturating_sub(broker.clock_slack());
    assert!(elapsed >= lower, "dropped after only {elapsed:?}");

    // The live group keeps refreshing past several retentions.
    tokio::time::sleep(retention + Duration::from_millis(500)).await;
    let receipt = producer
        .push_broadcast(&topic, "after".into())
        .await
        .unwrap();
    assert_eq!(receipt.group_count(), Some(1));
    loop {
        let d = next(&mut rx).await;
        assert_eq!(d.group, "stay", "{d:?}");
        if d.body == "after" {
            break;
        }
        assert_eq!(d.body, "probe");
    }

    shutdown_all(&[&producer, &gone_client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_rejected_with_clear_errors() {
    init_tracing();
    let broker = TestBroker::start().await;
    let topic = broker.unique_topic("bc-bad");
    let backend = DisqueBackend::connect(broker.config()).await.unwrap();
    let client = Client::new(backend, ClientConfig::default().with_max_payload_bytes(16));
    let noop = || {
        Arc::new(handler_fn(|_job: Job| async {
            Ok::<(), std::convert::Infallible>(())
        }))
    };

    for bad_topic in ["", "has space", "a|b", "__ezmq|bc|x", "é"] {
        let err = client
            .push_broadcast(bad_topic, "x".into())
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidTopic { .. }),
            "{bad_topic:?}: {err}"
        );
        let err = client
            .add_broadcast_listener(bad_topic, "g", noop())
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidTopic { .. }),
            "{bad_topic:?}: {err}"
        );
    }
    for bad_group in ["", "has space", "a|b", "__ezmq", "x".repeat(201).as_str()] {
        let err = client
            .add_broadcast_listener(&topic, bad_group, noop())
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidOption {
                    option: "group",
                    ..
                }
            ),
            "{bad_group:?}: {err}"
        );
        assert!(err.to_string().contains("group"), "{err}");
    }
    // Invalid listener options: the group is not joined.
    let err = client
        .add_broadcast_listener_with(
            &topic,
            "g",
            noop(),
            ConsumeOptions::new().with_concurrency(0),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidOption {
                option: "concurrency",
                ..
            }
        ),
        "{err}"
    );
    assert!(client
        .push_broadcast(&topic, "x".into())
        .await
        .unwrap()
        .is_empty());

    // Oversized body: rejected before anything is stored.
    client
        .add_broadcast_listener(&topic, "g", noop())
        .await
        .unwrap();
    let err = client
        .push_broadcast(&topic, vec![b'x'; 17].into())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::PayloadTooLarge { size: 17, max: 16 }),
        "{err}"
    );
    assert!(client
        .push_broadcast(&topic, vec![b'x'; 16].into())
        .await
        .is_ok());

    // Bad settings.
    let err = client
        .set_broadcast_config(BroadcastConfig::new().with_retention(Duration::ZERO))
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidOption {
                option: "retention",
                ..
            }
        ),
        "{err}"
    );
    let err = client
        .push_broadcast_delay(&topic, "x".into(), Duration::ZERO)
        .await;
    assert!(err.is_ok(), "a zero delay is fine: {err:?}");

    client.shutdown(Duration::from_secs(1)).await.unwrap();
    let err = client.push_broadcast(&topic, "x".into()).await.unwrap_err();
    assert!(matches!(err, Error::Shutdown), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_copies_go_to_a_readable_per_group_dead_letter_topic() {
    init_tracing();
    let broker = TestBroker::start().await;
    let topic = broker.unique_topic("bc-dead");
    let client = client_with(&broker, BroadcastConfig::new()).await;
    let options = ConsumeOptions::new().with_max_attempts(1);
    client
        .add_broadcast_listener_with(
            &topic,
            "billing",
            Arc::new(handler_fn(|_job: Job| async {
                Err::<(), _>(std::io::Error::other("ledger offline"))
            })),
            options,
        )
        .await
        .unwrap();

    let (tx, mut rx) = mpsc::unbounded_channel();
    let dead_topic = format!("{topic}.billing.dead-letter");
    client
        .add_listener(
            &dead_topic,
            Arc::new(handler_fn(move |job: Job| {
                let tx = tx.clone();
                async move {
                    tx.send(job.json::<ezmq_core::DeadLetterRecord>()?).ok();
                    Ok::<(), Error>(())
                }
            })),
            ConsumeOptions::new(),
        )
        .await
        .unwrap();

    client
        .push_broadcast(&topic, "invoice".into())
        .await
        .unwrap();
    let record = tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("no dead letter arrived")
        .unwrap();
    assert!(record.error.contains("ledger offline"), "{}", record.error);
    assert_eq!(record.body(), "invoice".as_bytes());
    client.shutdown(Duration::from_secs(1)).await.unwrap();
}
