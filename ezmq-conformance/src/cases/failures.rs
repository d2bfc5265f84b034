//! Failures: consumers that die, handlers that fail, dead letters.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use ezmq_core::{ConsumeOptions, DeadLetterRecord, Job, MqClient, MqClientExt, Permanent};

use crate::support::{
    assert_quiet, channel, drain, failure, receive_one, recv, recv_n, shutdown, shutdown_all,
    QUIET, SOON,
};
use crate::Ctx;

/// Longest wait for a broker to redeliver a message whose consumer
/// vanished without settling it (Disque's default retry window is 30 s).
const CRASH_REDELIVERY: Duration = Duration::from_secs(60);

/// At least once when a consumer dies before its ACK, two ways:
///
/// 1. client A's handler has the message and A shuts down with zero grace
///    (the handler is aborted): client B gets the message, soon;
/// 2. client A takes the message straight from the backend and closes its
///    connections without settling it (a crash): client B gets it once
///    the broker notices, as attempt 2 or later. With
///    [`Broker::connect_with_short_lease`](crate::Broker::connect_with_short_lease)
///    every client of this part is a short-lease one, so this takes about
///    the lease; without it, the broker's own redelivery (up to 60 s).
pub async fn at_least_once_when_consumer_dies(ctx: Ctx) {
    // Part 1: aborted handler.
    let producer = ctx.client().clone();
    let a = ctx.connect().await;
    let b = ctx.connect().await;
    let topic = ctx.topic("abort");
    let (got_tx, mut got_rx) = channel();
    a.add_consume_listener(&topic, move |job: Job| {
        let got_tx = got_tx.clone();
        async move {
            let _ = got_tx.send(job.into_body());
            // Never finishes: the shutdown below aborts it before any ACK.
            std::future::pending::<()>().await;
            Ok::<(), Infallible>(())
        }
    })
    .await
    .expect("add listener on A");
    producer
        .push(&topic, "survivor".into())
        .await
        .expect("push");
    let body = recv(&mut got_rx, SOON, "A's handler to receive the message").await;
    assert_eq!(&body[..], b"survivor");
    shutdown(&a, Duration::ZERO).await;

    let (tx, mut rx) = channel();
    b.add_consume_listener(&topic, move |job: Job| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(job);
            Ok::<(), Infallible>(())
        }
    })
    .await
    .expect("add listener on B");
    let job = recv(
        &mut rx,
        SOON,
        "B to receive the message A's aborted handler had",
    )
    .await;
    assert_eq!(&job.body()[..], b"survivor");
    assert_quiet(&mut rx, QUIET, "second delivery to B").await;
    shutdown_all(&[&producer, &b]).await;

    // Part 2: crash (connections closed, nothing settled).
    let short = ctx.connect_with_short_lease().await;
    let fast = short.is_some();
    let connect = || async {
        match ctx.connect_with_short_lease().await {
            Some(client) => client,
            None => ctx.connect().await,
        }
    };
    let producer = match short {
        Some(client) => client,
        None => ctx.connect().await,
    };
    let a = connect().await;
    let b = connect().await;
    let topic = ctx.topic("crash");
    producer.push(&topic, "orphan".into()).await.expect("push");
    let taken = receive_one(&a, &topic).await;
    assert_eq!(&taken.job.body()[..], b"orphan");
    // A "crashes": its connections close, the delivery is never settled.
    drop(taken);
    shutdown(&a, Duration::ZERO).await;

    let (tx, mut rx) = channel();
    b.add_consume_listener(&topic, move |job: Job| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(job);
            Ok::<(), Infallible>(())
        }
    })
    .await
    .expect("add listener on B");
    let started = Instant::now();
    let what = if fast {
        "B to receive the message of the crashed consumer (short lease)"
    } else {
        "B to receive the message of the crashed consumer (the broker's redelivery)"
    };
    let job = recv(&mut rx, CRASH_REDELIVERY, what).await;
    assert_eq!(&job.body()[..], b"orphan");
    if ctx.broker().counts_attempts_after_a_crash() {
        assert!(
            job.attempt() >= 2,
            "a delivery after a consumer died counts that attempt: got attempt {}",
            job.attempt()
        );
    } else {
        ctx.skip_because(&format!(
            "does not count the crashed delivery on this test broker (attempt {})",
            job.attempt()
        ));
    }
    println!(
        "{}: redelivered {:?} after the crash (short lease: {fast})",
        ctx.case(),
        started.elapsed()
    );
    shutdown_all(&[&producer, &b]).await;
}

/// A handler that always fails: attempts 1, 2, 3 arrive with gaps of at
/// least the backoff (200 ms, then 400 ms), then the message goes to the
/// dead-letter topic, where a normal listener reads a
/// [`DeadLetterRecord`] with `attempts == 3`, the error and the body.
pub async fn retry_with_backoff_then_dead_letter(ctx: Ctx) {
    let client = ctx.client().clone();
    let reader = ctx.connect().await;
    let topic = ctx.topic("failing");
    let options = ConsumeOptions::new()
        .with_max_attempts(3)
        .with_backoff(Duration::from_millis(200), Duration::from_secs(10));
    let backoff = options.backoff.clone();

    let (tx, mut rx) = channel();
    client
        .add_consume_listener_with(&topic, options, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send((job.attempt(), Instant::now()));
                Err(failure(format!("boom on attempt {}", job.attempt())))
            }
        })
        .await
        .expect("add listener");
    let (dl_tx, mut dl_rx) = channel();
    reader
        .add_consume_listener(&format!("{topic}.dead-letter"), move |job: Job| {
            let dl_tx = dl_tx.clone();
            async move {
                let _ = dl_tx.send(job);
                Ok::<(), Infallible>(())
            }
        })
        .await
        .expect("listen to the dead-letter topic");
    client.push(&topic, "doomed".into()).await.expect("push");

    let dead = recv(&mut dl_rx, SOON, "the dead letter").await;
    let record = DeadLetterRecord::from_job(&dead).expect("a DeadLetterRecord body");
    assert_eq!(record.topic, topic);
    assert_eq!(record.attempts, 3, "{record:?}");
    assert!(
        record.error.contains("boom on attempt 3"),
        "the last error: {record:?}"
    );
    assert!(!record.permanent);
    assert_eq!(&record.body()[..], b"doomed");

    // The handler reported attempt 3 before its failure dead-lettered it.
    let attempts = drain(&mut rx);
    assert_quiet(&mut rx, QUIET, "attempt after the dead letter").await;
    let numbers: Vec<u32> = attempts.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, [1, 2, 3], "attempts seen by the handler");
    for (i, pair) in attempts.windows(2).enumerate() {
        let gap = pair[1].1 - pair[0].1;
        let at_least = backoff.delay_after(i as u32 + 1);
        assert!(
            gap >= at_least,
            "attempt {} came {gap:?} after attempt {}, before the backoff {at_least:?}",
            i + 2,
            i + 1
        );
    }
    assert_quiet(&mut dl_rx, QUIET, "second dead letter").await;
    shutdown_all(&[&client, &reader]).await;
}

/// A [`Permanent`] handler error sends the message to the dead-letter
/// topic at once: one attempt (max_attempts is 5), a record marked
/// permanent.
pub async fn permanent_error_skips_retries(ctx: Ctx) {
    let client = ctx.client().clone();
    let reader = ctx.connect().await;
    let topic = ctx.topic("permanent");
    let dead_topic = ctx.topic("graveyard");

    let (tx, mut rx) = channel();
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new()
                .with_max_attempts(5)
                .with_dead_letter_topic(dead_topic.clone()),
            move |job: Job| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(job.attempt());
                    Err(Permanent::new(failure("order 42 does not exist")))
                }
            },
        )
        .await
        .expect("add listener");
    let (dl_tx, mut dl_rx) = channel();
    reader
        .add_consume_listener(&dead_topic, move |job: Job| {
            let dl_tx = dl_tx.clone();
            async move {
                let _ = dl_tx.send(job);
                Ok::<(), Infallible>(())
            }
        })
        .await
        .expect("listen to the dead-letter topic");
    client
        .push(&topic, "bad record".into())
        .await
        .expect("push");

    let dead = recv(&mut dl_rx, SOON, "the dead letter").await;
    let record = DeadLetterRecord::from_job(&dead).expect("a DeadLetterRecord body");
    assert_eq!(record.attempts, 1, "{record:?}");
    assert!(record.permanent, "{record:?}");
    assert!(
        record.error.contains("order 42 does not exist"),
        "{record:?}"
    );
    assert_eq!(&record.body()[..], b"bad record");
    let attempts = recv_n(&mut rx, 1, SOON, "attempts").await;
    assert_eq!(attempts, [1]);
    assert_quiet(&mut rx, QUIET, "retry of a permanent failure").await;
    shutdown_all(&[&client, &reader]).await;
}
