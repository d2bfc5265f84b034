//! The RabbitMQ backend against a real broker (`EZMQ_TEST_AMQP_URL`).

mod support;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ezmq_core::spi::{Backend, Capability, Source};
use ezmq_core::{
    ConsumeOptions, DeadLetterRecord, Error, MqClient, MqClientExt, PushOptions, Topic,
};
use ezmq_rabbitmq::{QueueType, RabbitBackend};
use support::{src, OwnLevels};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn push_confirm_consume_with_headers() {
    let Some(config) = support::config().await else {
        return;
    };
    let backend = RabbitBackend::connect(config).await.unwrap();
    let topic = support::topic("basic");
    let t = Topic::new(&topic).unwrap();
    let opts = PushOptions::new()
        .with_header("tenant", "acme")
        .with_header("trace", "x-1")
        .with_message_id("order-42");
    let id = backend.publish(&t, "hello".into(), &opts).await.unwrap();
    assert_eq!(id.as_str(), "order-42");
    let got = backend.receive(&src(&topic), 10, WAIT).await.unwrap();
    assert_eq!(got.len(), 1);
    let job = &got[0].job;
    assert_eq!(&job.body()[..], b"hello");
    assert_eq!(job.id().as_str(), "order-42");
    assert_eq!(job.headers().get("tenant"), Some("acme"));
    assert_eq!(job.headers().get("trace"), Some("x-1"));
    assert_eq!(job.attempt(), 1);
    got[0].handle.ack().await.unwrap();
    // Settling twice is harmless.
    got[0].handle.ack().await.unwrap();
    assert_eq!(
        backend.queue_stats().unwrap().queue_len(&t).await.unwrap(),
        0
    );
    backend.close().await.unwrap();
    support::cleanup(&[topic], &[]).await;
}

#[tokio::test]
async fn batch_acks_and_queue_len() {
    let Some(config) = support::config().await else {
        return;
    };
    let backend = RabbitBackend::connect(config).await.unwrap();
    let topic = support::topic("batch");
    let t = Topic::new(&topic).unwrap();
    for i in 0..20 {
        backend
            .publish(&t, format!("{i}").into(), &PushOptions::new())
            .await
            .unwrap();
    }
    let stats = backend.queue_stats().unwrap();
    assert_eq!(stats.queue_len(&t).await.unwrap(), 20);
    let missing = Topic::new(support::topic("missing")).unwrap();
    assert_eq!(stats.queue_len(&missing).await.unwrap(), 0);
    let mut handles = Vec::new();
    while handles.len() < 20 {
        let got = backend.receive(&src(&topic), 20, WAIT).await.unwrap();
        assert!(!got.is_empty());
        handles.extend(got.into_iter().map(|d| d.handle));
    }
    // Ack the second half first (not contiguous from the lowest tag: one by
    // one), then the first half (now a multiple ack is safe).
    backend.ack_batch(&handles[10..]).await.unwrap();
    backend.ack_batch(&handles[..10]).await.unwrap();
    // The channel is still healthy: nothing was acked twice.
    backend
        .publish(&t, "after".into(), &PushOptions::new())
        .await
        .unwrap();
    let got = backend.receive(&src(&topic), 5, WAIT).await.unwrap();
    assert_eq!(&got[0].job.body()[..], b"after");
    got[0].handle.ack().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(stats.queue_len(&t).await.unwrap(), 0);
    backend.close().await.unwrap();
    support::cleanup(&[topic], &[]).await;
}

#[tokio::test]
async fn cancelled_queue_len_calls_leave_no_channel_open() {
    let Some(config) = support::config().await else {
        return;
    };
    // A connection with 8 channels: one leaked per abandoned call would
    // soon leave none to open.
    let url = format!("{}?channel_max=8", config.url);
    let backend = RabbitBackend::connect(config.with_url(url)).await.unwrap();
    let topic = support::topic("cancelled-len");
    let t = Topic::new(&topic).unwrap();
    backend
        .publish(&t, "kept".into(), &PushOptions::new())
        .await
        .unwrap();
    let stats = backend.queue_stats().unwrap();
    let missing = Topic::new(support::topic("cancelled-len-missing")).unwrap();
    // Calls abandoned at some point of their round trips, as a listener's
    // depth sampler is when the listener stops; a third ask for a topic
    // nobody used.
    let (mut abandoned, mut answered) = (0, 0);
    for i in 0..120u64 {
        let topic = if i % 3 == 0 { &missing } else { &t };
        let mut call = std::pin::pin!(stats.queue_len(topic));
        // Every other call is dropped after 1 to 4 polls.
        let polls = if i % 2 == 0 {
            (i / 2) % 4 + 1
        } else {
            u64::MAX
        };
        let mut polled = 0;
        let outcome = std::future::poll_fn(|cx| {
            polled += 1;
            match call.as_mut().poll(cx) {
                std::task::Poll::Ready(len) => std::task::Poll::Ready(Some(len)),
                std::task::Poll::Pending if polled >= polls => std::task::Poll::Ready(None),
                std::task::Poll::Pending => std::task::Poll::Pending,
            }
        })
        .await;
        match outcome {
            None => abandoned += 1,
            Some(len) => {
                answered += 1;
                assert_eq!(len.unwrap(), u64::from(i % 3 != 0), "call {i}");
            }
        }
    }
    println!("{abandoned} of 120 queue_len calls abandoned half-way, {answered} answered");
    assert!(
        abandoned > 8,
        "too few calls were abandoned to prove anything"
    );
    assert_eq!(stats.queue_len(&t).await.unwrap(), 1);
    let got = backend.receive(&src(&topic), 1, WAIT).await.unwrap();
    assert_eq!(&got[0].job.body()[..], b"kept");
    got[0].handle.ack().await.unwrap();
    backend.close().await.unwrap();
    support::cleanup(&[topic, missing.as_str().to_owned()], &[]).await;
}

#[tokio::test]
async fn retry_then_dead_letter_with_record() {
    let Some(config) = support::config().await else {
        return;
    };
    let client = ezmq_rabbitmq::connect(config).await.unwrap();
    let topic = support::topic("retry");
    let dead = format!("{topic}.dead-letter");
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&attempts);
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new()
                .with_max_attempts(3)
                .with_backoff(Duration::from_millis(50), Duration::from_millis(200)),
            move |job| {
                let seen = Arc::clone(&seen);
                async move {
                    seen.lock()
                        .unwrap()
                        .push((job.attempt(), job.headers().clone()));
                    Err::<(), _>(std::io::Error::other("boom"))
                }
            },
        )
        .await
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_consume_listener(&dead, move |job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(job);
                Ok::<(), Error>(())
            }
        })
        .await
        .unwrap();
    client
        .push_with(
            &topic,
            "payload".into(),
            PushOptions::new().with_header("k", "v"),
        )
        .await
        .unwrap();
    let job = tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("dead letter in time")
        .unwrap();
    let record = DeadLetterRecord::from_job(&job).unwrap();
    assert_eq!(record.topic, topic);
    assert_eq!(record.attempts, 3);
    assert!(record.error.contains("boom"));
    assert_eq!(&record.body()[..], b"payload");
    let attempts = attempts.lock().unwrap().clone();
    assert_eq!(
        attempts.iter().map(|(a, _)| *a).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(attempts.iter().all(|(_, h)| h.get("k") == Some("v")));
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    support::cleanup(&[topic, dead], &[]).await;
}

#[tokio::test]
async fn delayed_short_after_long_is_not_blocked_and_never_early() {
    let Some(config) = support::config().await else {
        return;
    };
    // Own delay levels (a unique prefix) so they can be deleted afterwards.
    let own = OwnLevels::connect(config, "delay").await;
    let (backend, topic, t) = (&own.backend, &own.topic, &own.t);
    let long = PushOptions::new().with_delay(Duration::from_secs(3600));
    backend.publish(t, "late".into(), &long).await.unwrap();
    let mut lateness = Vec::new();
    for delay_ms in [1000u64, 300, 1500] {
        let delay = Duration::from_millis(delay_ms);
        let start = Instant::now();
        backend
            .publish(t, "soon".into(), &PushOptions::new().with_delay(delay))
            .await
            .unwrap();
        let got = backend
            .receive(&src(topic), 1, Duration::from_secs(30))
            .await
            .unwrap();
        let elapsed = start.elapsed();
        assert_eq!(got.len(), 1, "delayed message did not arrive");
        assert_eq!(&got[0].job.body()[..], b"soon");
        assert!(elapsed >= delay, "arrived early: {elapsed:?} < {delay:?}");
        assert!(
            elapsed < delay + Duration::from_secs(3),
            "too late: {elapsed:?}"
        );
        lateness.push(elapsed - delay);
        got[0].handle.ack().await.unwrap();
    }
    println!("delay lateness (push -> receive): {lateness:?}");
    let stats = backend.queue_stats().unwrap();
    assert_eq!(
        stats.queue_len(t).await.unwrap(),
        0,
        "the 1 h message is not counted"
    );
    own.close().await;
}

#[tokio::test]
async fn consumer_that_dies_leaves_its_message_redelivered() {
    let Some(config) = support::config().await else {
        return;
    };
    let topic = support::topic("dies");
    let t = Topic::new(&topic).unwrap();
    let first = RabbitBackend::connect(config.clone()).await.unwrap();
    first
        .publish(&t, "work".into(), &PushOptions::new())
        .await
        .unwrap();
    let got = first.receive(&src(&topic), 1, WAIT).await.unwrap();
    assert_eq!(got[0].job.attempt(), 1);
    // The consumer goes away without an ack.
    first.close().await.unwrap();
    drop(got);
    let second = RabbitBackend::connect(config).await.unwrap();
    let got = second.receive(&src(&topic), 1, WAIT).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].job.body()[..], b"work");
    assert_eq!(got[0].job.attempt(), 2, "a redelivery counts as an attempt");
    got[0].handle.ack().await.unwrap();
    second.close().await.unwrap();
    support::cleanup(&[topic], &[]).await;
}

#[tokio::test]
async fn release_gives_the_message_back_at_once() {
    let Some(config) = support::config().await else {
        return;
    };
    let backend = RabbitBackend::connect(config.with_queue_type(QueueType::Classic))
        .await
        .unwrap();
    let topic = support::topic("release");
    let t = Topic::new(&topic).unwrap();
    backend
        .publish(&t, "x".into(), &PushOptions::new())
        .await
        .unwrap();
    let got = backend.receive(&src(&topic), 1, WAIT).await.unwrap();
    got[0].handle.release().await.unwrap();
    let again = backend.receive(&src(&topic), 1, WAIT).await.unwrap();
    assert_eq!(&again[0].job.body()[..], b"x");
    assert!(matches!(
        again[0].handle.extend_lease().await,
        Err(Error::Unsupported {
            capability: Capability::LeaseExtension,
            ..
        })
    ));
    again[0].handle.ack().await.unwrap();
    backend.close().await.unwrap();
    support::cleanup(&[topic], &[]).await;
}

#[tokio::test]
async fn exactly_one_concurrent_claimer_wins() {
    let Some(config) = support::config().await else {
        return;
    };
    let mut backends = Vec::new();
    for _ in 0..4 {
        backends.push(RabbitBackend::connect(config.clone()).await.unwrap());
    }
    let key = Topic::new(support::topic("claim")).unwrap();
    let hold = Duration::from_secs(30);
    let claims = futures::future::join_all(backends.iter().flat_map(|b| {
        let key = key.clone();
        (0..3).map(move |_| {
            let key = key.clone();
            async move { b.exclusive_claim().unwrap().try_claim(&key, hold).await }
        })
    }))
    .await;
    let wins = claims.iter().filter(|c| matches!(c, Ok(true))).count();
    assert!(claims.iter().all(Result::is_ok), "{claims:?}");
    assert_eq!(wins, 1, "{claims:?}");
    let other = Topic::new(support::topic("claim")).unwrap();
    assert!(backends[0]
        .exclusive_claim()
        .unwrap()
        .try_claim(&other, hold)
        .await
        .unwrap());
    for b in &backends {
        b.close().await.unwrap();
    }
    support::cleanup(
        &[
            format!("__ezmq|claim|{key}"),
            format!("__ezmq|claim|{other}"),
        ],
        &[],
    )
    .await;
}

#[tokio::test]
async fn fan_out_reaches_each_group_once() {
    let Some(config) = support::config().await else {
        return;
    };
    let topic = Topic::new(support::topic("bcast")).unwrap();
    let groups = [Topic::new("billing").unwrap(), Topic::new("audit").unwrap()];
    // 2 groups x 2 members, each member its own backend.
    let mut members = Vec::new();
    for group in &groups {
        for _ in 0..2 {
            let b = RabbitBackend::connect(config.clone()).await.unwrap();
            let m = b
                .fan_out()
                .unwrap()
                .join_group(&topic, group, Duration::from_secs(60))
                .await
                .unwrap();
            m.refresh().await.unwrap();
            members.push((group.clone(), b, m));
        }
    }
    let publisher = &members[0].1;
    const N: usize = 20;
    for i in 0..N {
        let n = publisher
            .fan_out()
            .unwrap()
            .publish_to_groups(&topic, format!("{i}").into(), &PushOptions::new())
            .await
            .unwrap();
        assert_eq!(n, None);
    }
    let mut per_group: std::collections::HashMap<String, Vec<String>> = Default::default();
    let deadline = Instant::now() + Duration::from_secs(20);
    while per_group.values().map(Vec::len).sum::<usize>() < 2 * N && Instant::now() < deadline {
        for (group, b, _) in &members {
            let source = Source::Group {
                topic: topic.clone(),
                group: group.clone(),
            };
            for d in b
                .receive(&source, 5, Duration::from_millis(100))
                .await
                .unwrap()
            {
                per_group
                    .entry(group.to_string())
                    .or_default()
                    .push(String::from_utf8(d.job.body().to_vec()).unwrap());
                d.handle.ack().await.unwrap();
            }
        }
    }
    for group in &groups {
        let mut got = per_group.remove(group.as_str()).unwrap_or_default();
        got.sort_by_key(|s| s.parse::<usize>().unwrap());
        let want: Vec<String> = (0..N).map(|i| i.to_string()).collect();
        assert_eq!(got, want, "group {group}");
    }
    for (_, b, m) in &members {
        m.leave().await.unwrap();
        b.close().await.unwrap();
    }
    support::cleanup(
        &[
            format!("__ezmq|group|{topic}|billing"),
            format!("__ezmq|group|{topic}|audit"),
        ],
        &[format!("__ezmq|fanout|{topic}")],
    )
    .await;
}

#[tokio::test]
async fn request_inbox_round_trip() {
    let Some(config) = support::config().await else {
        return;
    };
    let requester = RabbitBackend::connect(config.clone()).await.unwrap();
    let replier = RabbitBackend::connect(config).await.unwrap();
    let inbox = requester
        .reply_channel()
        .unwrap()
        .open_inbox()
        .await
        .unwrap();
    assert!(inbox
        .receive(5, Duration::from_millis(50))
        .await
        .unwrap()
        .is_empty());
    for i in 0..3 {
        replier
            .reply_channel()
            .unwrap()
            .send_reply(
                inbox.address(),
                format!("r{i}").into(),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
    }
    let mut got = Vec::new();
    while got.len() < 3 {
        let batch = inbox.receive(5, WAIT).await.unwrap();
        assert!(!batch.is_empty());
        got.extend(batch);
    }
    assert_eq!(got, vec!["r0", "r1", "r2"]);
    inbox.close().await.unwrap();
    // A reply to a closed inbox is dropped, not an error.
    replier
        .reply_channel()
        .unwrap()
        .send_reply(inbox.address(), "late".into(), Duration::from_secs(1))
        .await
        .unwrap();
    requester.close().await.unwrap();
    replier.close().await.unwrap();
}

#[tokio::test]
async fn capabilities_and_unsupported_peek() {
    let Some(config) = support::config().await else {
        return;
    };
    let client = ezmq_rabbitmq::connect(config).await.unwrap();
    let caps = client.capabilities();
    assert!(caps.has(Capability::DelayedDelivery));
    assert!(caps.has(Capability::QueueStats));
    assert!(caps.has(Capability::ExclusiveClaim));
    assert!(caps.has(Capability::FanOut));
    assert!(caps.has(Capability::RequestReply));
    assert!(!caps.has(Capability::Peek));
    assert!(!caps.has(Capability::LeaseExtension));
    assert_eq!(client.backend_name(), "rabbitmq");
    let err = client.peek("anything", 1).await.unwrap_err();
    assert!(matches!(
        err,
        Error::Unsupported {
            capability: Capability::Peek,
            ..
        }
    ));
    assert_eq!(
        client.runtime().backend().delivery_deadline(),
        Some(Duration::from_secs(1800))
    );
    client.shutdown(Duration::from_secs(2)).await.unwrap();
}

#[tokio::test]
async fn listener_consumes_pushes_by_url() {
    if support::config().await.is_none() {
        return;
    }
    let client = ezmq_rabbitmq::connect_url(&support::url()).await.unwrap();
    let topic = support::topic("listener");
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new().with_concurrency(8),
            move |job| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(job.body().clone());
                    Ok::<(), Error>(())
                }
            },
        )
        .await
        .unwrap();
    for i in 0..50 {
        client.push(&topic, format!("{i}").into()).await.unwrap();
    }
    let mut n = 0;
    while n < 50 {
        tokio::time::timeout(WAIT, rx.recv())
            .await
            .unwrap()
            .unwrap();
        n += 1;
    }
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    support::cleanup(&[topic], &[]).await;
}

#[tokio::test]
async fn hung_broker_fails_calls_in_time_and_close_completes() {
    let Some(config) = support::config().await else {
        return;
    };
    // The real broker behind a relay that can freeze: connections stay
    // open and nothing is answered, as with a stopped broker process.
    let proxy = ezmq_test_support::StallingProxy::in_front_of(&support::url()).await;
    let config = config
        .with_url(proxy.route(&support::url()))
        .with_operation_timeout(Duration::from_secs(1));
    let backend = RabbitBackend::connect(config).await.unwrap();
    let topic = support::topic("hung");
    let t = Topic::new(&topic).unwrap();
    backend
        .publish(&t, "before".into(), &PushOptions::new())
        .await
        .unwrap();

    proxy.stall();
    // Generous bounds: the calls give up after about 1 s.
    let bound = Duration::from_secs(15);
    let opts = PushOptions::new();
    let publish = backend.publish(&t, "during".into(), &opts);
    let err = tokio::time::timeout(bound, publish)
        .await
        .expect("a publish to a hung broker was held past 15 s")
        .unwrap_err();
    // Sent, never confirmed: the broker may have stored it.
    assert!(err.is_outcome_unknown(), "{err:?}");
    assert!(!err.is_retryable(), "{err}");
    assert!(err.to_string().contains("timed out"), "{err}");
    // A publish that never left (the publisher channel cannot even be
    // reopened on a hung broker) is not "unknown".
    let other = Topic::new(support::topic("hung-other")).unwrap();
    let stats = backend.queue_stats().unwrap();
    let err = tokio::time::timeout(bound, stats.queue_len(&other))
        .await
        .expect("queue_len on a hung broker was held past 15 s")
        .unwrap_err();
    assert!(err.to_string().contains("timed out"), "{err}");
    tokio::time::timeout(bound, backend.close())
        .await
        .expect("closing the client of a hung broker was held past 15 s")
        .unwrap();

    proxy.resume();
    support::cleanup(&[topic, other.as_str().to_owned()], &[]).await;
}
