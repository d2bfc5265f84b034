//! Push, consume and settle against the real Redis at EZMQ_TEST_REDIS_URL.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ezmq_core::spi::{Backend, Source};
use ezmq_core::{ConsumeOptions, DeadLetterRecord, Job, MqClient, MqClientExt, PushOptions, Topic};
use ezmq_redis::RedisBackend;
use tokio::sync::mpsc;
use tokio::time::timeout;

const LONG: Duration = Duration::from_secs(15);

#[tokio::test]
async fn push_consume_with_headers_and_message_id() {
    let Some(config) = support::config().await else {
        return;
    };
    let client = support::client(&config).await;
    let topic = support::topic("basic");
    let mut rx = support::forwarded_jobs(&client, &topic, ConsumeOptions::new()).await;
    let plain = client.push(&topic, "plain".into()).await.unwrap();
    let with = client
        .push_with(
            &topic,
            vec![0u8, 255, 7].into(),
            PushOptions::new()
                .with_header("tenant", "acme")
                .with_header("trace", "t-1")
                .with_message_id("order-42"),
        )
        .await
        .unwrap();
    assert_eq!(with.as_str(), "order-42");
    let first = timeout(LONG, rx.recv()).await.unwrap().unwrap();
    assert_eq!(first.body().as_ref(), b"plain");
    assert_eq!(first.id(), &plain);
    assert_eq!(first.attempt(), 1);
    // Only core's own headers (the job id, ...): none of the producer's.
    assert!(first
        .headers()
        .iter()
        .all(|(name, _)| name.starts_with(ezmq_core::RESERVED_HEADER_PREFIX)));
    assert_eq!(
        first.headers().get(ezmq_core::MESSAGE_ID_HEADER),
        Some(plain.as_str())
    );
    let second = timeout(LONG, rx.recv()).await.unwrap().unwrap();
    assert_eq!(second.body().as_ref(), &[0u8, 255, 7]);
    assert_eq!(second.id().as_str(), "order-42");
    assert_eq!(second.headers().get("tenant"), Some("acme"));
    assert_eq!(second.headers().get("trace"), Some("t-1"));
    // Acknowledged entries are deleted: nothing waits, nothing is left.
    assert!(support::eventually(LONG, || true).await);
    let deadline = Instant::now() + LONG;
    while client.queue_len(&topic).await.unwrap() != 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(client.queue_len(&topic).await.unwrap(), 0);
    client.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn retry_then_dead_letter_with_attempts() {
    let Some(config) = support::config().await else {
        return;
    };
    let client = support::client(&config).await;
    let topic = support::topic("retry");
    let dead = format!("{topic}.dead-letter");
    let (tx, mut rx) = mpsc::unbounded_channel::<(u32, String)>();
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new()
                .with_max_attempts(3)
                .with_backoff(Duration::from_millis(50), Duration::from_millis(200)),
            move |job: Job| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send((job.attempt(), job.id().to_string()));
                    Err::<(), _>(std::io::Error::other("boom"))
                }
            },
        )
        .await
        .unwrap();
    let (dtx, mut drx) = mpsc::unbounded_channel::<DeadLetterRecord>();
    client
        .add_consume_listener(&dead, move |job: Job| {
            let dtx = dtx.clone();
            async move {
                let _ = dtx.send(DeadLetterRecord::from_job(&job).expect("a dead-letter record"));
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    let id = client.push(&topic, "fails".into()).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (attempt, job_id) = timeout(LONG, rx.recv()).await.unwrap().unwrap();
        assert_eq!(job_id, id.as_str(), "the id is stable across retries");
        seen.push(attempt);
    }
    assert_eq!(seen, [1, 2, 3]);
    let record = timeout(LONG, drx.recv()).await.unwrap().unwrap();
    assert_eq!(record.attempts, 3);
    assert!(record.error.contains("boom"), "{}", record.error);
    assert_eq!(record.body().as_ref(), b"fails");
    assert!(
        timeout(Duration::from_millis(500), rx.recv())
            .await
            .is_err(),
        "no fourth attempt"
    );
    client.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn short_delay_after_long_delay_arrives_on_time() {
    let Some(config) = support::config().await else {
        return;
    };
    let client = support::client(&config).await;
    let topic = support::topic("delay");
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, Instant)>();
    client
        .add_consume_listener(&topic, move |job: Job| {
            let tx = tx.clone();
            async move {
                let body = String::from_utf8_lossy(job.body()).into_owned();
                let _ = tx.send((body, Instant::now()));
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    client
        .push_delay(&topic, "hour".into(), Duration::from_secs(3600))
        .await
        .unwrap();
    let pushed = Instant::now();
    client
        .push_delay(&topic, "second".into(), Duration::from_secs(1))
        .await
        .unwrap();
    let (body, at) = timeout(LONG, rx.recv()).await.unwrap().unwrap();
    assert_eq!(body, "second");
    let after = at.duration_since(pushed);
    assert!(after >= Duration::from_millis(990), "early: {after:?}");
    assert!(after < Duration::from_millis(1500), "late: {after:?}");
    assert!(timeout(Duration::from_millis(300), rx.recv())
        .await
        .is_err());
    assert_eq!(
        client.queue_len(&topic).await.unwrap(),
        0,
        "delayed jobs are not counted"
    );
    client.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn lease_extension_prevents_redelivery_of_long_handlers() {
    let Some(config) = support::config().await else {
        return;
    };
    let config = config.with_lease(Duration::from_secs(1));
    let topic = support::topic("lease");
    let runs = Arc::new(AtomicU32::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let mut clients = Vec::new();
    for _ in 0..2 {
        let client = support::client(&config).await;
        let runs = Arc::clone(&runs);
        let tx = tx.clone();
        client
            .add_consume_listener(&topic, move |_job: Job| {
                let runs = Arc::clone(&runs);
                let tx = tx.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    let _ = tx.send(());
                    Ok::<(), std::io::Error>(())
                }
            })
            .await
            .unwrap();
        clients.push(client);
    }
    clients[0].push(&topic, "slow".into()).await.unwrap();
    timeout(LONG, rx.recv()).await.unwrap().unwrap();
    // Two more leases: a reclaim would have happened by now.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "delivered twice");
    for client in clients {
        client.shutdown(Duration::from_secs(5)).await.unwrap();
    }
}

#[tokio::test]
async fn crashed_consumers_job_is_reclaimed_after_the_lease() {
    let Some(config) = support::config().await else {
        return;
    };
    let config = config.with_lease(Duration::from_secs(1));
    let topic = support::topic("crash");
    let crashed = RedisBackend::connect(config.clone()).await.unwrap();
    let client = support::client(&config).await;
    client.push(&topic, "orphan".into()).await.unwrap();
    let source = Source::Topic(Topic::new(topic.clone()).unwrap());
    let got = crashed.receive(&source, 1, LONG).await.unwrap();
    assert_eq!(got.len(), 1);
    let taken = Instant::now();
    drop(got);
    drop(crashed); // never settles: a consumer that died
    let mut rx = support::forwarded_jobs(&client, &topic, ConsumeOptions::new()).await;
    let job = timeout(LONG, rx.recv()).await.unwrap().unwrap();
    assert_eq!(job.body().as_ref(), b"orphan");
    assert_eq!(job.attempt(), 2);
    assert!(
        taken.elapsed() >= Duration::from_secs(1),
        "reclaimed before the lease ended"
    );
    client.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn queue_len_and_peek_count_waiting_messages_only() {
    let Some(config) = support::config().await else {
        return;
    };
    let client = support::client(&config).await;
    let backend = RedisBackend::connect(config.clone()).await.unwrap();
    let topic = support::topic("stats");
    assert_eq!(client.queue_len(&topic).await.unwrap(), 0);
    for body in ["a", "b", "c"] {
        client.push(&topic, body.into()).await.unwrap();
    }
    client
        .push_delay(&topic, "later".into(), Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(client.queue_len(&topic).await.unwrap(), 3);
    let peeked: Vec<_> = client.peek(&topic, 2).await.unwrap();
    let bodies: Vec<_> = peeked.iter().map(|j| j.body().clone()).collect();
    assert_eq!(bodies, [&b"a"[..], &b"b"[..]]);
    let source = Source::Topic(Topic::new(topic.clone()).unwrap());
    let got = backend.receive(&source, 1, LONG).await.unwrap();
    assert_eq!(got[0].job.body().as_ref(), b"a");
    assert_eq!(
        client.queue_len(&topic).await.unwrap(),
        2,
        "in flight is not waiting"
    );
    let bodies: Vec<_> = client
        .peek(&topic, 10)
        .await
        .unwrap()
        .iter()
        .map(|j| j.body().clone())
        .collect();
    assert_eq!(bodies, [&b"b"[..], &b"c"[..]]);
    got[0].handle.release().await.unwrap();
    assert_eq!(
        client.queue_len(&topic).await.unwrap(),
        3,
        "released is waiting again"
    );
    backend.close().await.unwrap();
    client.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn exclusive_claim_has_one_winner() {
    let Some(config) = support::config().await else {
        return;
    };
    let a = RedisBackend::connect(config.clone()).await.unwrap();
    let b = RedisBackend::connect(config.clone()).await.unwrap();
    let key = Topic::new(support::topic("claim")).unwrap();
    let hold = Duration::from_millis(300);
    let (x, y) = tokio::join!(
        a.exclusive_claim().unwrap().try_claim(&key, hold),
        b.exclusive_claim().unwrap().try_claim(&key, hold)
    );
    assert!(x.unwrap() ^ y.unwrap(), "exactly one winner");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(b
        .exclusive_claim()
        .unwrap()
        .try_claim(&key, hold)
        .await
        .unwrap());
}

#[tokio::test]
async fn reply_inbox_receives_replies_once() {
    let Some(config) = support::config().await else {
        return;
    };
    let backend = RedisBackend::connect(config.clone()).await.unwrap();
    let replier = RedisBackend::connect(config.clone()).await.unwrap();
    let channel = backend.reply_channel().unwrap();
    let inbox = channel.open_inbox().await.unwrap();
    let empty = inbox.receive(10, Duration::from_millis(50)).await.unwrap();
    assert!(empty.is_empty());
    let address = inbox.address().to_owned();
    let waiting = tokio::spawn(async move {
        let got = inbox.receive(10, Duration::from_secs(5)).await.unwrap();
        (inbox, got)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rc = replier.reply_channel().unwrap();
    rc.send_reply(&address, "one".into(), Duration::from_secs(5))
        .await
        .unwrap();
    let (inbox, got) = waiting.await.unwrap();
    assert_eq!(got, [&b"one"[..]]);
    rc.send_reply(&address, "two".into(), Duration::from_secs(5))
        .await
        .unwrap();
    rc.send_reply(&address, "three".into(), Duration::from_secs(5))
        .await
        .unwrap();
    let got = inbox.receive(10, Duration::from_secs(1)).await.unwrap();
    assert_eq!(got, [&b"two"[..], &b"three"[..]]);
    assert!(rc
        .send_reply("not-an-inbox", "x".into(), Duration::from_secs(1))
        .await
        .is_err());
    inbox.close().await.unwrap();
}

#[tokio::test]
async fn hung_redis_fails_pushes_in_time_and_shutdown_completes() {
    let Some(config) = support::config().await else {
        return;
    };
    // The real Redis behind a relay that can freeze: connections stay open
    // and nothing is answered, as with a stopped server process.
    let (proxy, client) = support::behind_stalling_proxy(config).await;
    let topic = support::topic("hung");
    let mut rx = support::forwarded_jobs(&client, &topic, ConsumeOptions::new()).await;
    client.push(&topic, "before".into()).await.unwrap();
    let got = timeout(LONG, rx.recv()).await.unwrap().unwrap();
    assert_eq!(&got.body()[..], b"before");

    proxy.stall();
    let err = timeout(LONG, client.push(&topic, "during".into()))
        .await
        .expect("a push to a hung Redis was held past 15 s")
        .unwrap_err();
    // It was sent: it may be stored once Redis answers (tests/outcome.rs).
    assert!(err.is_outcome_unknown(), "{err}");
    timeout(LONG, client.shutdown(Duration::from_secs(2)))
        .await
        .expect("shutting down beside a hung Redis was held past 15 s")
        .unwrap();
    proxy.resume();
}
