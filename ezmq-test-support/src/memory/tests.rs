//! Leases, delays and the optional abilities, on a paused clock.

use std::time::Duration;

use ezmq_core::spi::{Backend, Delivery, ExclusiveClaim, FanOut, QueueStats, ReplyChannel, Source};
use ezmq_core::{Error, PushOptions, Topic};
use tokio::time::Instant;

use super::{MemoryBackend, MemoryBroker, MemoryConfig, MemoryError};

const LEASE: Duration = Duration::from_secs(10);

fn topic(name: &str) -> Topic {
    Topic::new(name).unwrap()
}

fn source(name: &str) -> Source {
    Source::Topic(topic(name))
}

fn leased() -> MemoryBackend {
    MemoryBroker::new().backend_with(MemoryConfig::default().with_lease(LEASE))
}

async fn push(backend: &MemoryBackend, name: &str, body: &'static str, options: PushOptions) {
    backend
        .publish(&topic(name), body.into(), &options)
        .await
        .unwrap();
}

/// One delivery, waiting up to `wait`; `None` when nothing came.
async fn take(backend: &MemoryBackend, name: &str, wait: Duration) -> Option<Delivery> {
    let mut got = backend.receive(&source(name), 1, wait).await.unwrap();
    assert!(got.len() <= 1);
    got.pop()
}

fn assert_not_leased(result: ezmq_core::Result<impl std::fmt::Debug>) {
    match result {
        Err(Error::Backend { source, retryable }) => {
            assert!(!retryable);
            assert!(
                matches!(
                    source.downcast_ref::<MemoryError>(),
                    Some(MemoryError::NotLeased { .. })
                ),
                "{source}"
            );
        }
        other => panic!("expected NotLeased, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn an_unsettled_delivery_is_redelivered_when_its_lease_runs_out() {
    let backend = leased();
    push(&backend, "jobs", "a", PushOptions::new()).await;
    let first = take(&backend, "jobs", Duration::ZERO).await.unwrap();
    assert_eq!(first.job.attempt(), 1);
    let started = Instant::now();

    // A receiver waiting meanwhile wakes when the lease runs out.
    let again = take(&backend, "jobs", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        started.elapsed(),
        LEASE,
        "redelivered exactly when the lease ran out"
    );
    assert_eq!(
        again.job.attempt(),
        2,
        "the lost delivery counts as an attempt"
    );
    assert_eq!(again.job.id(), first.job.id(), "the message keeps its id");
    assert_eq!(&again.job.body()[..], b"a");

    // The first consumer lost it: its settles fail, never touch the new one.
    assert_not_leased(first.handle.ack().await);
    assert_not_leased(first.handle.extend_lease().await);
    assert_eq!(backend.in_flight(&topic("jobs")).await.unwrap(), Some(1));
    again.handle.ack().await.unwrap();
    assert_eq!(backend.in_flight(&topic("jobs")).await.unwrap(), Some(0));
    assert!(
        take(&backend, "jobs", LEASE * 3).await.is_none(),
        "acked for good"
    );
}

#[tokio::test(start_paused = true)]
async fn extending_the_lease_keeps_the_delivery() {
    let backend = leased();
    push(&backend, "jobs", "a", PushOptions::new()).await;
    let delivery = take(&backend, "jobs", Duration::ZERO).await.unwrap();
    for _ in 0..3 {
        tokio::time::advance(LEASE - Duration::from_secs(2)).await;
        assert_eq!(delivery.handle.extend_lease().await.unwrap(), LEASE);
    }
    // 24 s after the delivery, 2.4 leases: still with its consumer.
    assert!(take(&backend, "jobs", Duration::ZERO).await.is_none());
    assert_eq!(backend.queue_len(&topic("jobs")).await.unwrap(), 0);
    assert_eq!(backend.in_flight(&topic("jobs")).await.unwrap(), Some(1));
    delivery.handle.ack().await.unwrap();
    assert_not_leased(delivery.handle.ack().await);
}

#[tokio::test(start_paused = true)]
async fn a_waiting_receiver_wakes_when_a_delayed_message_is_due() {
    let backend = leased();
    let delay = Duration::from_secs(5);
    push(&backend, "later", "d", PushOptions::new().with_delay(delay)).await;
    assert_eq!(
        backend.queue_len(&topic("later")).await.unwrap(),
        0,
        "not ready yet"
    );
    let started = Instant::now();
    let got = take(&backend, "later", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        started.elapsed(),
        delay,
        "delivered when due, not before or later"
    );
    assert_eq!(&got.job.body()[..], b"d");
}

#[tokio::test(start_paused = true)]
async fn a_receiver_already_waiting_sees_an_earlier_delayed_message() {
    let backend = leased();
    push(
        &backend,
        "later",
        "late",
        PushOptions::new().with_delay(Duration::from_secs(50)),
    )
    .await;
    let started = Instant::now();
    let (got, ()) = tokio::join!(take(&backend, "later", Duration::from_secs(60)), async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        push(
            &backend,
            "later",
            "soon",
            PushOptions::new().with_delay(Duration::from_secs(2)),
        )
        .await;
    });
    assert_eq!(&got.unwrap().job.body()[..], b"soon");
    assert_eq!(started.elapsed(), Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn retry_is_the_next_attempt_after_its_delay_and_release_the_same_attempt_first() {
    let backend = leased();
    push(&backend, "jobs", "a", PushOptions::new()).await;
    push(&backend, "jobs", "b", PushOptions::new()).await;
    let a = take(&backend, "jobs", Duration::ZERO).await.unwrap();
    a.handle.release().await.unwrap();
    let a = take(&backend, "jobs", Duration::ZERO).await.unwrap();
    assert_eq!(
        (&a.job.body()[..], a.job.attempt()),
        (&b"a"[..], 1),
        "released: first in line, same attempt"
    );

    let started = Instant::now();
    a.handle.retry(Duration::from_secs(3)).await.unwrap();
    let b = take(&backend, "jobs", Duration::ZERO).await.unwrap();
    assert_eq!(&b.job.body()[..], b"b");
    b.handle.ack().await.unwrap();
    let a = take(&backend, "jobs", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    assert_eq!((&a.job.body()[..], a.job.attempt()), (&b"a"[..], 2));
    assert_not_leased(b.handle.release().await);
}

#[tokio::test(start_paused = true)]
async fn close_fails_later_calls_with_shutdown_and_keeps_the_messages() {
    let broker = MemoryBroker::new();
    let backend = broker.backend_with(MemoryConfig::default().with_lease(LEASE));
    push(&backend, "jobs", "a", PushOptions::new()).await;
    let delivery = take(&backend, "jobs", Duration::ZERO).await.unwrap();
    backend.close().await.unwrap();
    backend.close().await.unwrap();
    let publish = backend
        .publish(&topic("jobs"), "x".into(), &PushOptions::new())
        .await;
    assert!(matches!(publish, Err(Error::Shutdown)), "{publish:?}");
    let receive = backend.receive(&source("jobs"), 1, Duration::ZERO).await;
    assert!(matches!(receive, Err(Error::Shutdown)), "{receive:?}");
    assert!(matches!(delivery.handle.ack().await, Err(Error::Shutdown)));
    assert!(matches!(
        backend.queue_len(&topic("jobs")).await,
        Err(Error::Shutdown)
    ));

    // Another connection gets the closed one's message when its lease ends.
    let other = broker.backend();
    let again = take(&other, "jobs", LEASE * 2).await.unwrap();
    assert_eq!(again.job.attempt(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_message_id_seen_within_the_window_stores_nothing() {
    let window = Duration::from_secs(10);
    let backend =
        MemoryBroker::new().backend_with(MemoryConfig::default().with_message_id_window(window));
    // As core's producer pipeline stamps it.
    let mut with_id = PushOptions::new().with_message_id("order-1");
    ezmq_core::JobMeta::stamp(&mut with_id);
    let t = topic("orders");
    let first = backend.publish(&t, "1".into(), &with_id).await.unwrap();
    assert_eq!(first.as_str(), "order-1");
    let again = backend
        .publish(&t, "1 again".into(), &with_id)
        .await
        .unwrap();
    assert_eq!(again, first);
    backend
        .publish(&topic("other"), "1".into(), &with_id)
        .await
        .unwrap();
    assert_eq!(
        backend.queue_len(&t).await.unwrap(),
        1,
        "the duplicate stored nothing"
    );
    assert_eq!(
        backend.queue_len(&topic("other")).await.unwrap(),
        1,
        "windows are per topic"
    );
    let got = take(&backend, "orders", Duration::ZERO).await.unwrap();
    assert_eq!(
        got.job.headers().get(ezmq_core::MESSAGE_ID_HEADER),
        Some("order-1")
    );

    tokio::time::advance(window).await;
    backend
        .publish(&t, "after the window".into(), &with_id)
        .await
        .unwrap();
    assert_eq!(
        backend.queue_len(&t).await.unwrap(),
        1,
        "stored once the window ended"
    );
}

#[tokio::test(start_paused = true)]
async fn a_message_past_its_ttl_is_dropped() {
    let backend = leased();
    push(
        &backend,
        "short",
        "gone",
        PushOptions::new().with_ttl(Duration::from_secs(1)),
    )
    .await;
    push(&backend, "short", "kept", PushOptions::new()).await;
    assert_eq!(backend.queue_len(&topic("short")).await.unwrap(), 2);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(backend.queue_len(&topic("short")).await.unwrap(), 1);
    let got = take(&backend, "short", Duration::ZERO).await.unwrap();
    assert_eq!(&got.job.body()[..], b"kept");
}

#[tokio::test(start_paused = true)]
async fn groups_get_what_is_published_after_they_joined_until_their_retention_ends() {
    let backend = leased();
    let (t, g1, g2) = (topic("news"), topic("g1"), topic("g2"));
    let retention = Duration::from_secs(30);
    let none = backend
        .publish_to_groups(&t, "before".into(), &PushOptions::new())
        .await
        .unwrap();
    assert_eq!(none, Some(0));
    let m1 = backend.join_group(&t, &g1, retention).await.unwrap();
    let m2 = backend.join_group(&t, &g2, retention).await.unwrap();
    let reached = backend
        .publish_to_groups(&t, "one".into(), &PushOptions::new())
        .await
        .unwrap();
    assert_eq!(reached, Some(2));
    let groups = backend.groups(&t).await.unwrap().unwrap();
    let names: Vec<_> = groups
        .iter()
        .map(|g| (g.name.as_str(), g.members, g.waiting))
        .collect();
    assert_eq!(names, [("g1", Some(1), Some(1)), ("g2", Some(1), Some(1))]);
    for group in [&g1, &g2] {
        let source = Source::Group {
            topic: t.clone(),
            group: group.clone(),
        };
        let got = backend.receive(&source, 10, Duration::ZERO).await.unwrap();
        let bodies: Vec<_> = got.iter().map(|d| d.job.body().clone()).collect();
        assert_eq!(
            bodies,
            ["one"],
            "each group gets its copy, nothing from before it joined"
        );
        got[0].handle.ack().await.unwrap();
    }

    // g1 keeps refreshing; g2's member left: g2 goes after the retention.
    m2.leave().await.unwrap();
    tokio::time::advance(retention / 2).await;
    m1.refresh().await.unwrap();
    tokio::time::advance(retention / 2).await;
    m1.refresh().await.unwrap();
    let reached = backend
        .publish_to_groups(&t, "two".into(), &PushOptions::new())
        .await
        .unwrap();
    assert_eq!(reached, Some(1), "the group without members was dropped");
    let groups = backend.groups(&t).await.unwrap().unwrap();
    assert_eq!(
        groups.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(),
        ["g1"]
    );
}

#[tokio::test(start_paused = true)]
async fn one_claim_wins_until_its_hold_ends() {
    let broker = MemoryBroker::new();
    let (a, b) = (broker.backend(), broker.backend());
    let key = topic("tick-1");
    let hold = Duration::from_secs(5);
    assert!(a.try_claim(&key, hold).await.unwrap());
    assert!(!b.try_claim(&key, hold).await.unwrap());
    assert!(!a.try_claim(&key, hold).await.unwrap());
    tokio::time::advance(hold).await;
    assert!(b.try_claim(&key, hold).await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn replies_reach_the_open_inbox_and_go_with_it() {
    let broker = MemoryBroker::new();
    let (caller, worker) = (broker.backend(), broker.backend());
    let inbox = caller.open_inbox().await.unwrap();
    let address = inbox.address().to_owned();
    let started = Instant::now();
    let (got, ()) = tokio::join!(inbox.receive(10, Duration::from_secs(60)), async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        worker
            .send_reply(&address, "pong".into(), Duration::from_secs(5))
            .await
            .unwrap();
    });
    assert_eq!(got.unwrap(), ["pong"]);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(1),
        "woken by the reply"
    );

    worker
        .send_reply(&address, "stale".into(), Duration::from_secs(1))
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(
        inbox.receive(10, Duration::ZERO).await.unwrap().is_empty(),
        "past its ttl"
    );

    caller.close().await.unwrap();
    worker
        .send_reply(&address, "late".into(), Duration::from_secs(5))
        .await
        .unwrap();
    let closed = inbox.receive(10, Duration::ZERO).await;
    assert!(matches!(closed, Err(Error::Shutdown)), "{closed:?}");
    assert!(broker.backend().open_inbox().await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_stopped_broker_fails_calls_retryably_and_keeps_its_messages() {
    let broker = MemoryBroker::new();
    let backend = broker.backend_with(MemoryConfig::default().with_lease(LEASE));
    push(&backend, "jobs", "a", PushOptions::new()).await;
    push(&backend, "jobs", "b", PushOptions::new()).await;
    let a = take(&backend, "jobs", Duration::ZERO).await.unwrap();
    let retryable = |r: &ezmq_core::Result<()>| {
        matches!(r, Err(Error::Backend { retryable: true, source })
            if matches!(source.downcast_ref::<MemoryError>(), Some(MemoryError::Unavailable)))
    };

    // A receiver waiting when the broker stops gets the error at once.
    let started = Instant::now();
    let idle = source("idle");
    let (waiting, ()) = tokio::join!(backend.receive(&idle, 1, Duration::from_secs(60)), async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        broker.stop();
    });
    assert!(retryable(&waiting.map(drop)));
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    assert!(!broker.is_up());
    let publish = backend
        .publish(&topic("jobs"), "x".into(), &PushOptions::new())
        .await;
    assert!(retryable(&publish.map(drop)), "nothing stored while down");
    assert!(retryable(&a.handle.ack().await));

    broker.start();
    assert!(broker.is_up());
    a.handle.ack().await.unwrap();
    let b = take(&backend, "jobs", Duration::ZERO).await.unwrap();
    assert_eq!(&b.job.body()[..], b"b", "the messages survived");
    assert_eq!(backend.queue_len(&topic("jobs")).await.unwrap(), 0);
}
