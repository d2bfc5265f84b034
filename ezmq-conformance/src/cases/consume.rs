//! Push and consume: delivery, headers, limits, concurrency.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ezmq_core::{
    Bytes, ConsumeOptions, Error, Job, MqClient, MqClientExt, PushOptions, RESERVED_HEADER_PREFIX,
};

use crate::support::{
    assert_quiet, channel, recv, recv_n, shutdown, shutdown_all, text, QUIET, SOON,
};
use crate::Ctx;

/// 100 messages pushed by one client (half before the listener starts,
/// half after) are all delivered to another client's listener exactly
/// once, bodies intact, on attempt 1. After shutdown, pushes fail with
/// [`Error::Shutdown`].
pub async fn push_consume(ctx: Ctx) {
    const N: usize = 100;
    let producer = ctx.client().clone();
    let consumer = ctx.connect().await;
    let topic = ctx.topic("jobs");

    let body = |i: usize| Bytes::from(format!("message {i} \u{e9}\u{1F600} {}", "x".repeat(i)));
    for i in 0..N / 2 {
        producer.push(&topic, body(i)).await.expect("push");
    }
    let (tx, mut rx) = channel();
    consumer
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new().with_concurrency(16),
            move |job: Job| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(job);
                    Ok::<(), Infallible>(())
                }
            },
        )
        .await
        .expect("add listener");
    for i in N / 2..N {
        producer.push(&topic, body(i)).await.expect("push");
    }

    let jobs = recv_n(&mut rx, N, SOON, "deliveries").await;
    assert_quiet(&mut rx, QUIET, "second delivery").await;
    let mut seen = BTreeMap::new();
    for job in &jobs {
        assert_eq!(
            job.topic().as_str(),
            topic,
            "delivered from the wrong topic"
        );
        assert_eq!(job.attempt(), 1, "first delivery must be attempt 1");
        *seen.entry(job.body().clone()).or_insert(0) += 1;
    }
    for i in 0..N {
        assert_eq!(
            seen.get(&body(i)).copied(),
            Some(1),
            "message {i} must be delivered exactly once, intact"
        );
    }
    let ids: std::collections::BTreeSet<_> = jobs.iter().map(|j| j.id().clone()).collect();
    assert_eq!(ids.len(), N, "every message has its own id");

    shutdown_all(&[&producer, &consumer]).await;
    assert!(
        matches!(
            producer.push(&topic, "late".into()).await,
            Err(Error::Shutdown)
        ),
        "a push after shutdown must fail with Error::Shutdown"
    );
}

/// User headers and a producer-chosen message id reach the handler;
/// header names starting with `ezmq-` (and empty names) are rejected at
/// push time with [`Error::InvalidOption`], and nothing is sent.
pub async fn headers_round_trip(ctx: Ctx) {
    let producer = ctx.client().clone();
    let consumer = ctx.connect().await;
    let topic = ctx.topic("headers");

    for bad in [
        format!("{RESERVED_HEADER_PREFIX}attempt"),
        "ezmq-custom".into(),
        String::new(),
    ] {
        let result = producer
            .push_with(
                &topic,
                "rejected".into(),
                PushOptions::new().with_header(bad.clone(), "1"),
            )
            .await;
        assert!(
            matches!(result, Err(Error::InvalidOption { .. })),
            "header name {bad:?} must be rejected with Error::InvalidOption, got {result:?}"
        );
    }

    let message_id = format!("order-{}", uuid::Uuid::new_v4());
    let options = PushOptions::new()
        .with_header("tenant", "acme")
        .with_header("trace-parent", "00-abc-def-01")
        .with_header("note", "spaces, = and \u{e9}")
        .with_header("empty", "")
        .with_message_id(message_id.clone());
    let pushed = producer
        .push_with(&topic, "with headers".into(), options)
        .await
        .expect("push with headers");
    assert_eq!(
        pushed.as_str(),
        message_id,
        "push returns the producer's message id"
    );
    producer
        .push(&topic, "without headers".into())
        .await
        .expect("push without headers");

    let (tx, mut rx) = channel();
    consumer
        .add_consume_listener(&topic, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(job);
                Ok::<(), Infallible>(())
            }
        })
        .await
        .expect("add listener");
    let jobs = recv_n(&mut rx, 2, SOON, "messages").await;
    assert_quiet(&mut rx, QUIET, "message (a rejected push was sent?)").await;
    let find = |body: &[u8]| {
        jobs.iter()
            .find(|j| &j.body()[..] == body)
            .unwrap_or_else(|| panic!("{:?} not delivered: {jobs:?}", text(body)))
    };
    let (with, without) = (find(b"with headers"), find(b"without headers"));
    assert_eq!(
        with.id().as_str(),
        message_id,
        "Job::id is the producer's id"
    );
    let h = with.headers();
    assert_eq!(h.get("tenant"), Some("acme"));
    assert_eq!(h.get("trace-parent"), Some("00-abc-def-01"));
    assert_eq!(h.get("note"), Some("spaces, = and \u{e9}"));
    assert_eq!(h.get("empty"), Some(""));
    let user = |job: &Job| {
        job.headers()
            .iter()
            .filter(|(k, _)| !k.starts_with(RESERVED_HEADER_PREFIX))
            .count()
    };
    assert_eq!(user(with), 4, "exactly the user headers pushed: {h:?}");
    assert_eq!(user(without), 0, "no user headers: {:?}", without.headers());

    shutdown_all(&[&producer, &consumer]).await;
}

/// True for [`Error::InvalidTopic`].
fn is_invalid<T>(result: &ezmq_core::Result<T>) -> bool {
    matches!(result, Err(Error::InvalidTopic { .. }))
}

/// A payload over the client's `max_payload_bytes` fails with
/// [`Error::PayloadTooLarge`] and invalid topic names with
/// [`Error::InvalidTopic`] (push, listener, queue length, peek), before
/// anything is sent; a 64 KiB binary payload round-trips intact.
pub async fn payload_and_topic_limits(ctx: Ctx) {
    let producer = ctx.client().clone();
    let consumer = ctx.connect().await;
    let topic = ctx.topic("limits");
    let max = producer.runtime().config().max_payload_bytes;

    let result = producer.push(&topic, vec![b'x'; max + 1].into()).await;
    match result {
        Err(Error::PayloadTooLarge { size, max: limit }) => {
            assert_eq!(
                (size, limit),
                (max + 1, max),
                "the error names size and limit"
            );
        }
        other => panic!(
            "a {} byte payload must fail with PayloadTooLarge, got {other:?}",
            max + 1
        ),
    }
    let result = producer
        .push_with(
            &topic,
            vec![0; max + 1].into(),
            PushOptions::new().with_header("a", "b"),
        )
        .await;
    assert!(
        matches!(result, Err(Error::PayloadTooLarge { .. })),
        "push_with: {result:?}"
    );

    let long = "t".repeat(ezmq_core::MAX_TOPIC_LEN + 1);
    for bad in [
        "",
        "has space",
        "a|b",
        "caf\u{e9}",
        "__ezmq|internal",
        long.as_str(),
    ] {
        let what = format!("topic {bad:?}");
        let r = producer.push(bad, "x".into()).await;
        assert!(is_invalid(&r), "push to {what}: {r:?}");
        let r = producer
            .push_with(bad, "x".into(), PushOptions::new())
            .await;
        assert!(is_invalid(&r), "push_with to {what}: {r:?}");
        let r = consumer
            .add_consume_listener(bad, |_job: Job| async { Ok::<(), Infallible>(()) })
            .await;
        assert!(is_invalid(&r), "listener on {what}: {r:?}");
        let r = producer.queue_len(bad).await;
        assert!(is_invalid(&r), "queue_len of {what}: {r:?}");
        let r = producer.peek(bad, 1).await;
        assert!(is_invalid(&r), "peek of {what}: {r:?}");
    }

    let binary: Bytes = (0..64 * 1024)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    producer
        .push(&topic, binary.clone())
        .await
        .expect("push 64 KiB");
    let (tx, mut rx) = channel();
    consumer
        .add_consume_listener(&topic, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(job.into_body());
                Ok::<(), Infallible>(())
            }
        })
        .await
        .expect("add listener");
    let first = recv(&mut rx, SOON, "the binary payload").await;
    assert!(
        first == binary,
        "the first message must be the 64 KiB payload, intact (the rejected pushes sent \
         nothing); got {} bytes starting {:?}",
        first.len(),
        text(&first[..first.len().min(16)])
    );
    assert_quiet(&mut rx, QUIET, "message (a rejected push was sent?)").await;

    shutdown_all(&[&producer, &consumer]).await;
}

/// A listener with concurrency 3 runs 3 handlers at once when enough
/// messages wait, and never more.
pub async fn concurrency_limit_respected(ctx: Ctx) {
    const LIMIT: usize = 3;
    const N: usize = 15;
    let client = ctx.client().clone();
    let topic = ctx.topic("limit");
    for i in 0..N {
        client
            .push(&topic, format!("{i}").into())
            .await
            .expect("push");
    }

    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = channel();
    let listener = {
        let (running, peak) = (Arc::clone(&running), Arc::clone(&peak));
        client
            .add_consume_listener_with(
                &topic,
                ConsumeOptions::new().with_concurrency(LIMIT),
                move |job: Job| {
                    let (running, peak, tx) = (Arc::clone(&running), Arc::clone(&peak), tx.clone());
                    async move {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        // The work: long enough for the other slots to fill.
                        tokio::time::sleep(Duration::from_millis(150)).await;
                        running.fetch_sub(1, Ordering::SeqCst);
                        let _ = tx.send(job.into_body());
                        Ok::<(), Infallible>(())
                    }
                },
            )
            .await
            .expect("add listener")
    };
    let mut watcher_peak = 0;
    let deadline = tokio::time::Instant::now() + SOON;
    let mut done = 0;
    while done < N {
        watcher_peak = watcher_peak.max(listener.in_flight());
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(_)) => done += 1,
            _ => panic!("timed out with {done} of {N} jobs handled"),
        }
    }
    let peak = peak.load(Ordering::SeqCst);
    assert!(
        peak <= LIMIT,
        "{peak} handlers ran at once, the limit is {LIMIT}"
    );
    assert_eq!(
        peak, LIMIT,
        "with {N} messages waiting, {LIMIT} handlers should run at once"
    );
    assert!(
        watcher_peak <= LIMIT,
        "ListenerHandle::in_flight reported {watcher_peak}"
    );
    shutdown(&client, Duration::from_secs(5)).await;
}
