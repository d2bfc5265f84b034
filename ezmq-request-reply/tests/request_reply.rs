//! Request-reply against a real broker (the embedded Disque server, or the
//! nodes named by `EZMQ_TEST_DISQUE_ADDRS`).

mod support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ezmq_core::{Error, MqClient, MqClientExt};
use ezmq_request_reply::{ReplyListenerOptions, Request, RequestReplyExt};
use futures::future::join_all;
use serde::{Deserialize, Serialize};

use support::{echo_worker, options, setup};

const GRACE: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_each_get_their_own_reply() {
    let (broker, topic) = setup("rr-many").await;
    let workers = [
        broker.client().await,
        broker.client().await,
        broker.client().await,
    ];
    for (w, name) in workers.iter().zip(["w0", "w1", "w2"]) {
        echo_worker(w, &topic, name, 32).await;
    }
    let callers = [broker.client().await, broker.client().await];

    let started = Instant::now();
    let calls = (0..1000u32).map(|i| {
        let caller = callers[(i % 2) as usize].clone();
        let topic = topic.clone();
        async move {
            let body = format!("req-{i}");
            let reply = caller
                .request(&topic, body.clone().into(), Duration::from_secs(30))
                .await
                .unwrap_or_else(|e| panic!("request {i} failed: {e}"));
            (i, body, reply)
        }
    });
    let results = join_all(calls.map(tokio::spawn)).await;
    let elapsed = started.elapsed();

    let mut ids = HashSet::new();
    let mut per_worker = [0usize; 3];
    for result in results {
        let (i, body, reply) = result.expect("request task");
        let text = std::str::from_utf8(reply.body()).expect("utf-8 reply");
        let (echoed, worker) = text.rsplit_once('@').expect("reply has a worker name");
        assert_eq!(echoed, body, "request {i} got another request's reply");
        per_worker[worker[1..].parse::<usize>().expect("worker index")] += 1;
        assert!(ids.insert(reply.correlation_id()), "correlation id reused");
    }
    assert_eq!(ids.len(), 1000);
    eprintln!("1000 requests in {elapsed:?}; handled per worker: {per_worker:?}");

    for c in callers.iter().chain(&workers) {
        c.shutdown(GRACE).await.expect("shutdown");
    }
}

#[tokio::test]
async fn binary_bodies_round_trip() {
    let (broker, topic) = setup("rr-binary").await;
    let worker = broker.client().await;
    worker
        .add_reply_listener_with(&topic, options(4), |req: Request| async move {
            Ok::<_, std::io::Error>(req.into_body())
        })
        .await
        .expect("listener");
    let caller = broker.client().await;
    let body: Vec<u8> = (0..=255u8).chain(*b"\r\n\n{\"v\":1}\n").collect();
    let reply = caller
        .request(&topic, body.clone().into(), Duration::from_secs(10))
        .await
        .expect("reply");
    assert_eq!(&reply.body()[..], &body[..]);
    let empty = caller
        .request(&topic, Bytes::new(), Duration::from_secs(10))
        .await
        .expect("reply");
    assert!(empty.body().is_empty());
    caller.shutdown(GRACE).await.expect("shutdown");
    worker.shutdown(GRACE).await.expect("shutdown");
}

#[tokio::test]
async fn times_out_within_bound_without_worker() {
    let (broker, topic) = setup("rr-timeout").await;
    let caller = broker.client().await;
    let timeout = Duration::from_millis(500);
    let started = Instant::now();
    let err = caller
        .request(&topic, "anyone?".into(), timeout)
        .await
        .expect_err("nobody answers");
    let elapsed = started.elapsed();
    assert!(
        matches!(err, Error::NoReply { after, .. } if after == timeout),
        "{err:?}"
    );
    assert!(err.is_timeout(), "{err:?}");
    assert!(
        err.to_string().contains("is a reply listener running"),
        "{err}"
    );
    assert!(elapsed >= timeout, "timed out early: {elapsed:?}");
    assert!(
        elapsed < Duration::from_secs(2),
        "timed out late: {elapsed:?}"
    );

    // The client still works after a timeout.
    let again = caller
        .request(&topic, "still nobody".into(), Duration::from_millis(100))
        .await;
    assert!(matches!(again, Err(Error::NoReply { .. })), "{again:?}");
    caller.shutdown(GRACE).await.expect("shutdown");
}

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    sku: String,
    qty: u32,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Quote {
    sku: String,
    cents: u64,
}

#[tokio::test]
async fn json_requests_and_remote_errors() {
    let (broker, topic) = setup("rr-json").await;
    let worker = broker.client().await;
    worker
        .add_json_reply_listener_with(&topic, options(4), |order: Order| async move {
            match order.sku.as_str() {
                "boom" => panic!("handler exploded on {}", order.sku),
                "none" => Err(std::io::Error::other(format!(
                    "out of stock: {}",
                    order.sku
                ))),
                _ => Ok(Quote {
                    cents: 250 * u64::from(order.qty),
                    sku: order.sku,
                }),
            }
        })
        .await
        .expect("listener");
    let caller = broker.client().await;
    let t = Duration::from_secs(10);

    let order = |sku: &str| Order {
        sku: sku.into(),
        qty: 4,
    };
    let quote: Quote = caller
        .request_json(&topic, &order("apple"), t)
        .await
        .expect("quote");
    assert_eq!(
        quote,
        Quote {
            sku: "apple".into(),
            cents: 1000
        }
    );

    let err = caller
        .request_json::<_, Quote>(&topic, &order("none"), t)
        .await
        .expect_err("remote error");
    match err {
        Error::Remote { message } => assert_eq!(message, "out of stock: none"),
        other => panic!("expected a remote error, got {other:?}"),
    }

    let started = Instant::now();
    let err = caller
        .request_json::<_, Quote>(&topic, &order("boom"), t)
        .await
        .expect_err("remote panic");
    match err {
        Error::Remote { message } => {
            assert!(message.contains("panicked"), "{message}");
            assert!(message.contains("handler exploded on boom"), "{message}");
        }
        other => panic!("expected a remote error, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "panic made the caller wait"
    );

    // A body that is not an `Order` gets an error reply, not a timeout.
    let err = caller
        .request(&topic, "not json".into(), t)
        .await
        .expect_err("bad request");
    assert!(
        matches!(&err, Error::Remote { message } if message.starts_with("invalid request body")),
        "{err:?}"
    );

    // The worker survived all of it.
    let quote: Quote = caller
        .request_json(&topic, &order("pear"), t)
        .await
        .expect("quote after errors");
    assert_eq!(quote.cents, 1000);

    caller.shutdown(GRACE).await.expect("shutdown");
    worker.shutdown(GRACE).await.expect("shutdown");
}

#[tokio::test]
async fn slow_worker_times_out_and_next_request_gets_its_own_reply() {
    let (broker, topic) = setup("rr-slow").await;
    let worker = broker.client().await;
    worker
        .add_reply_listener_with(&topic, options(1), |req: Request| async move {
            if req.body().as_ref() == b"slow" {
                tokio::time::sleep(Duration::from_millis(1200)).await;
            }
            Ok::<_, std::io::Error>(req.into_body())
        })
        .await
        .expect("listener");
    let caller = broker.client().await;

    let err = caller
        .request(&topic, "slow".into(), Duration::from_millis(400))
        .await
        .expect_err("worker too slow");
    assert!(err.is_timeout(), "{err:?}");
    // Queued behind the slow request (concurrency 1).
    let reply = caller
        .request(&topic, "fast".into(), Duration::from_secs(10))
        .await
        .expect("reply");
    assert_eq!(&reply.body()[..], b"fast");

    caller.shutdown(GRACE).await.expect("shutdown");
    worker.shutdown(GRACE).await.expect("shutdown");
}

/// A worker that ignores deadlines (or whose clock is behind) sends a reply
/// after its caller gave up: the reply reaches the caller's reply queue and
/// must be dropped there, not handed to the next request.
#[tokio::test]
async fn late_reply_is_dropped_not_given_to_the_next_caller() {
    let (broker, topic) = setup("rr-late").await;
    let rogue = broker.client().await;
    let pusher = rogue.clone();
    rogue
        .add_consume_listener_with(&topic, options(1), move |job| {
            let pusher = pusher.clone();
            async move {
                // Read the documented headers and reply format by hand.
                let reply_to = job.headers().get("reply-to").expect("reply-to").to_owned();
                let id = job
                    .headers()
                    .get("correlation-id")
                    .expect("correlation-id")
                    .to_owned();
                let payload = job.body().clone();
                if payload.as_ref() == b"slow" {
                    tokio::time::sleep(Duration::from_millis(1200)).await;
                }
                let mut msg = format!("{{\"v\":1,\"id\":\"{id}\",\"ok\":true}}\n").into_bytes();
                msg.extend_from_slice(&payload);
                pusher
                    .runtime()
                    .reply_channel()?
                    .send_reply(&reply_to, msg.into(), Duration::from_secs(30))
                    .await?;
                Ok::<(), Error>(())
            }
        })
        .await
        .expect("listener");
    let caller = broker.client().await;

    let err = caller
        .request(&topic, "slow".into(), Duration::from_millis(400))
        .await
        .expect_err("worker too slow");
    assert!(err.is_timeout(), "{err:?}");
    // The late "slow" reply arrives while this request waits.
    let started = Instant::now();
    let reply = caller
        .request(&topic, "fast".into(), Duration::from_secs(10))
        .await
        .expect("reply");
    assert_eq!(&reply.body()[..], b"fast", "got the late reply");
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the late reply was not in flight"
    );

    caller.shutdown(GRACE).await.expect("shutdown");
    rogue.shutdown(GRACE).await.expect("shutdown");
}

#[tokio::test]
async fn expired_request_is_not_handled() {
    let (broker, topic) = setup("rr-expired").await;
    let caller = broker.client().await;
    let err = caller
        .request(&topic, "old".into(), Duration::from_millis(1500))
        .await
        .expect_err("no worker yet");
    assert!(err.is_timeout());

    // The request is still in the queue (its TTL is 2 s) but past its
    // deadline: a worker started now must drop it unhandled.
    let calls = Arc::new(AtomicUsize::new(0));
    let worker = broker.client().await;
    let seen = Arc::clone(&calls);
    worker
        .add_reply_listener_with(&topic, options(4), move |req: Request| {
            seen.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, std::io::Error>(req.into_body()) }
        })
        .await
        .expect("listener");
    let reply = caller
        .request(&topic, "new".into(), Duration::from_secs(10))
        .await
        .expect("reply");
    assert_eq!(&reply.body()[..], b"new");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the expired request ran");

    caller.shutdown(GRACE).await.expect("shutdown");
    worker.shutdown(GRACE).await.expect("shutdown");
}

#[tokio::test]
async fn at_least_once_reply_listeners_work() {
    let (broker, topic) = setup("rr-alo").await;
    let worker = broker.client().await;
    worker
        .add_reply_listener_with(
            &topic,
            ReplyListenerOptions::from(options(4)).with_at_least_once(true),
            |req: Request| async move {
                let mut body = req.body().to_vec();
                body.extend_from_slice(b"@w");
                Ok::<_, std::io::Error>(Bytes::from(body))
            },
        )
        .await
        .expect("listener");
    let caller = broker.client().await;
    let reply = caller
        .request(&topic, "x".into(), Duration::from_secs(5))
        .await
        .expect("reply");
    assert_eq!(&reply.body()[..], b"x@w");
    caller.shutdown(GRACE).await.expect("shutdown");
    worker.shutdown(GRACE).await.expect("shutdown");
}

#[tokio::test]
async fn shutdown_fails_waiting_callers_at_once() {
    let (broker, topic) = setup("rr-shutdown").await;
    let caller = broker.client().await;
    let waiting = {
        let caller = caller.clone();
        let topic = topic.clone();
        tokio::spawn(async move {
            let result = caller
                .request(&topic, "never answered".into(), Duration::from_secs(30))
                .await;
            (result, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let shutdown_at = Instant::now();
    caller.shutdown(GRACE).await.expect("shutdown");
    let (result, failed_at) = waiting.await.expect("request task");
    assert!(matches!(result, Err(Error::Shutdown)), "{result:?}");
    let after = failed_at.saturating_duration_since(shutdown_at);
    assert!(
        after < Duration::from_millis(500),
        "failed {after:?} after shutdown"
    );

    // New requests fail at once too.
    let started = Instant::now();
    let result = caller
        .request(&topic, "too late".into(), Duration::from_secs(30))
        .await;
    assert!(matches!(result, Err(Error::Shutdown)), "{result:?}");
    assert!(started.elapsed() < Duration::from_millis(250));
}

#[tokio::test]
async fn invalid_arguments_are_rejected_before_sending() {
    let (broker, _topic) = setup("rr-invalid").await;
    let caller = broker.client().await;
    let err = caller
        .request("bad topic", Bytes::new(), Duration::from_secs(1))
        .await
        .expect_err("invalid topic");
    assert!(matches!(err, Error::InvalidTopic { .. }), "{err:?}");
    let err = caller
        .request("ok", Bytes::new(), Duration::ZERO)
        .await
        .expect_err("zero timeout");
    assert!(
        matches!(
            err,
            Error::InvalidOption {
                option: "timeout",
                ..
            }
        ),
        "{err:?}"
    );
    caller.shutdown(GRACE).await.expect("shutdown");
}
