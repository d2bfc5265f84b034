//! Integration tests over real TCP against the embedded Disque server (or
//! the external nodes named by `EZMQ_TEST_DISQUE_ADDRS`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ezmq_disque::spi::{Backend, ExclusiveClaim, Source};
use ezmq_disque::{
    ConsumeOptions, DisqueBackend, DisqueConfig, DisquePushOptions, Error, Job, MqClient,
    MqClientExt, PushOptions, Topic,
};
use ezmq_test_support::{eventually, init_tracing, skip_unless_embedded, TestBroker};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, Semaphore};
use tokio::time::timeout;

/// Generous bound for anything that should happen "soon".
const SOON: Duration = Duration::from_secs(15);

async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    timeout(SOON, rx.recv())
        .await
        .expect("timed out waiting for an event")
        .expect("channel closed")
}

async fn setup() -> TestBroker {
    init_tracing();
    TestBroker::start().await
}

#[tokio::test]
async fn push_consume_round_trip() {
    let broker = setup().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("round-trip");
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_consume_listener(&topic, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send((job.body().clone(), job.attempt(), job.topic().clone()));
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    let id = client.push(&topic, "hello".into()).await.unwrap();
    // Core's id (a UUIDv7), not Disque's: it survives a re-add.
    assert!(id.created_at().is_some(), "{id}");
    let (body, attempt, got_topic) = recv(&mut rx).await;
    assert_eq!(body.as_ref(), b"hello");
    assert_eq!(attempt, 1);
    assert_eq!(got_topic.as_str(), topic);
    // Acked: nothing left anywhere.
    assert!(
        eventually(SOON, || {
            let client = client.clone();
            let topic = topic.clone();
            async move { client.queue_len(&topic).await.ok() == Some(0) }
        })
        .await
    );
    client.shutdown(Duration::from_secs(1)).await.unwrap();
    assert!(matches!(
        client.push(&topic, "late".into()).await,
        Err(Error::Shutdown)
    ));
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u32,
    item: String,
}

#[tokio::test]
async fn typed_json_round_trip() {
    let broker = setup().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("json");
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_json_listener(&topic, move |order: Order| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(order);
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    let order = Order {
        id: 7,
        item: "book".into(),
    };
    client.push_json(&topic, &order).await.unwrap();
    assert_eq!(recv(&mut rx).await, order);
}

#[tokio::test]
async fn delayed_push_is_not_delivered_early() {
    let broker = setup().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("delay");
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_consume_listener(&topic, move |_job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(Instant::now());
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    let start = Instant::now();
    client
        .push_delay(&topic, "later".into(), Duration::from_millis(1500))
        .await
        .unwrap();
    let got = recv(&mut rx).await;
    let waited = got - start;
    // 1.5 s rounds up to 2 s: never early.
    assert!(waited >= Duration::from_millis(1500), "{waited:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
}

#[tokio::test]
async fn failing_handler_is_retried_then_dead_lettered() {
    let broker = setup().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("fails");
    let dead = broker.unique_topic("fails-dead");
    let calls = Arc::new(AtomicUsize::new(0));
    let (attempt_tx, mut attempt_rx) = mpsc::unbounded_channel();
    let options = ConsumeOptions::new()
        .with_max_attempts(3)
        .with_backoff(Duration::from_millis(10), Duration::from_millis(50))
        .with_dead_letter_topic(dead.clone());
    let counter = Arc::clone(&calls);
    client
        .add_consume_listener_with(&topic, options, move |job: Job| {
            let counter = Arc::clone(&counter);
            let tx = attempt_tx.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = tx.send(job.attempt());
                Err::<(), _>(std::io::Error::other(format!(
                    "boom on attempt {}",
                    job.attempt()
                )))
            }
        })
        .await
        .unwrap();
    let (dead_tx, mut dead_rx) = mpsc::unbounded_channel();
    client
        .add_consume_listener(&dead, move |job: Job| {
            let tx = dead_tx.clone();
            async move {
                let _ = tx.send(job);
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    client.push(&topic, "payload-1".into()).await.unwrap();

    let attempts = [
        recv(&mut attempt_rx).await,
        recv(&mut attempt_rx).await,
        recv(&mut attempt_rx).await,
    ];
    assert_eq!(attempts, [1, 2, 3]);
    let record = recv(&mut dead_rx).await;
    let text = String::from_utf8_lossy(record.body()).into_owned();
    assert!(text.contains("boom on attempt 3"), "{text}");
    assert!(text.contains("payload-1"), "{text}");
    // Exactly one record, no fourth attempt.
    assert!(timeout(Duration::from_millis(800), dead_rx.recv())
        .await
        .is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn panicking_handler_does_not_kill_the_listener() {
    let broker = setup().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("panics");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let options = ConsumeOptions::new()
        .with_concurrency(1)
        .with_max_attempts(1)
        .with_dead_letter(ezmq_disque::DeadLetter::Drop);
    client
        .add_consume_listener_with(&topic, options, move |job: Job| {
            let tx = tx.clone();
            async move {
                if job.body().as_ref() == b"panic" {
                    panic!("handler blew up");
                }
                let _ = tx.send(job.body().clone());
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    client.push(&topic, "panic".into()).await.unwrap();
    client.push(&topic, "ok".into()).await.unwrap();
    assert_eq!(recv(&mut rx).await.as_ref(), b"ok");
}

#[tokio::test]
async fn concurrency_limit_is_respected() {
    let broker = setup().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("concurrency");
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let (started_tx, mut started_rx) = mpsc::unbounded_channel();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    {
        let (running, peak, gate) = (Arc::clone(&running), Arc::clone(&peak), Arc::clone(&gate));
        client
            .add_consume_listener_with(
                &topic,
                ConsumeOptions::new().with_concurrency(3),
                move |_job: Job| {
                    let (running, peak, gate) =
                        (Arc::clone(&running), Arc::clone(&peak), Arc::clone(&gate));
                    let (started_tx, done_tx) = (started_tx.clone(), done_tx.clone());
                    async move {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        let _ = started_tx.send(());
                        let permit = gate.acquire().await.map_err(std::io::Error::other)?;
                        permit.forget();
                        running.fetch_sub(1, Ordering::SeqCst);
                        let _ = done_tx.send(());
                        Ok::<(), std::io::Error>(())
                    }
                },
            )
            .await
            .unwrap();
    }
    for i in 0..10 {
        client
            .push(&topic, format!("job-{i}").into())
            .await
            .unwrap();
    }
    for _ in 0..3 {
        recv(&mut started_rx).await;
    }
    // No fourth handler while three are blocked.
    assert!(timeout(Duration::from_millis(500), started_rx.recv())
        .await
        .is_err());
    assert_eq!(running.load(Ordering::SeqCst), 3);
    gate.add_permits(10);
    for _ in 0..10 {
        recv(&mut done_rx).await;
    }
    assert_eq!(peak.load(Ordering::SeqCst), 3);
}

/// Jobs start in the fetch loop while their handlers finish at once; a
/// handler that works before its first await must not keep the others
/// waiting behind it: they still run side by side on the worker threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn handlers_busy_before_their_first_await_still_run_in_parallel() {
    let broker = setup().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("cpu-bound");
    const JOBS: usize = 8;
    for i in 0..JOBS {
        client
            .push(&topic, format!("job-{i}").into())
            .await
            .unwrap();
    }
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    {
        let (running, peak) = (Arc::clone(&running), Arc::clone(&peak));
        client
            .add_consume_listener_with(
                &topic,
                ConsumeOptions::new().with_concurrency(4),
                move |_job: Job| {
                    let (running, peak, done_tx) =
                        (Arc::clone(&running), Arc::clone(&peak), done_tx.clone());
                    async move {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        // Stands for CPU work: it holds its thread, no await.
                        std::thread::sleep(Duration::from_millis(100));
                        running.fetch_sub(1, Ordering::SeqCst);
                        let _ = done_tx.send(());
                        Ok::<(), std::io::Error>(())
                    }
                },
            )
            .await
            .unwrap();
    }
    for _ in 0..JOBS {
        recv(&mut done_rx).await;
    }
    let peak = peak.load(Ordering::SeqCst);
    assert!(
        peak >= 2,
        "the handlers ran one at a time (peak {peak}), on 4 worker threads"
    );
}

#[tokio::test]
async fn long_handler_is_not_redelivered_while_it_runs() {
    let broker = setup().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("long");
    let calls = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let counter = Arc::clone(&calls);
    client
        .add_consume_listener_with(
            &topic,
            // The first heartbeat must come before the 1 s retry window ends
            // (the runtime's default `heartbeat_after` is exactly 1 s).
            ConsumeOptions::new()
                .with_concurrency(4)
                .with_heartbeat_after(Duration::from_millis(300)),
            move |_job: Job| {
                let counter = Arc::clone(&counter);
                let tx = tx.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    // The work itself takes this long (not a synchronisation).
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    let _ = tx.send(());
                    Ok::<(), std::io::Error>(())
                }
            },
        )
        .await
        .unwrap();
    client
        .push_with(
            &topic,
            "slow".into(),
            PushOptions::new()
                .with_backend_options(DisquePushOptions::new().with_retry(Duration::from_secs(1))),
        )
        .await
        .unwrap();
    recv(&mut rx).await;
    // Past another retry window: still handled exactly once.
    assert!(timeout(Duration::from_millis(1500), rx.recv())
        .await
        .is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn shutdown_mid_job_gives_the_job_back() {
    let broker = setup().await;
    let topic = broker.unique_topic("handover");
    let a = broker.client().await;
    let (started_tx, mut started_rx) = mpsc::unbounded_channel();
    a.add_consume_listener(&topic, move |_job: Job| {
        let started_tx = started_tx.clone();
        async move {
            let _ = started_tx.send(());
            std::future::pending::<()>().await;
            Ok::<(), std::io::Error>(())
        }
    })
    .await
    .unwrap();
    a.push(&topic, "precious".into()).await.unwrap();
    recv(&mut started_rx).await;
    a.shutdown(Duration::from_millis(200)).await.unwrap();

    let b = broker.client().await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    b.add_consume_listener(&topic, move |job: Job| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(job);
            Ok::<(), std::io::Error>(())
        }
    })
    .await
    .unwrap();
    let job = recv(&mut rx).await;
    assert_eq!(job.body().as_ref(), b"precious");
    assert!(job.attempt() >= 2, "{job:?}");
}

#[tokio::test]
async fn listeners_survive_a_server_restart() {
    let broker = setup().await;
    skip_unless_embedded!(broker);
    let client = broker.client().await;
    let topic = broker.unique_topic("restart");
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_consume_listener(&topic, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(job.body().clone());
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    client.push(&topic, "before".into()).await.unwrap();
    assert_eq!(recv(&mut rx).await.as_ref(), b"before");

    broker.restart().await;

    // The first push may hit the broken connection; it fails over and
    // reconnects by itself, but allow a retry for a slow restart.
    let pushed = eventually(SOON, || {
        let client = client.clone();
        let topic = topic.clone();
        async move { client.push(&topic, "after".into()).await.is_ok() }
    })
    .await;
    assert!(pushed);
    assert_eq!(recv(&mut rx).await.as_ref(), b"after");
}

#[tokio::test]
async fn fetch_fails_while_the_server_is_down_and_resumes() {
    let broker = setup().await;
    skip_unless_embedded!(broker);
    let backend = DisqueBackend::connect(broker.config().with_max_attempts(2))
        .await
        .unwrap();
    let topic = Topic::new(broker.unique_topic("down")).unwrap();
    let source = Source::Topic(topic.clone());
    let wait = Duration::from_millis(100);
    assert!(backend.receive(&source, 1, wait).await.unwrap().is_empty());

    broker.stop().await;
    let err = backend.receive(&source, 1, wait).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(backend
        .publish(&topic, "x".into(), &PushOptions::new())
        .await
        .is_err());

    broker.start_again().await;
    let back = eventually(SOON, || async {
        backend
            .publish(&topic, "x".into(), &PushOptions::new())
            .await
            .is_ok()
    })
    .await;
    assert!(back);
    let jobs = backend
        .receive(&source, 1, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(jobs.len(), 1);
    jobs[0].handle.ack().await.unwrap();
    backend.close().await.unwrap();
}

#[tokio::test]
async fn unreachable_server_gives_a_clear_error() {
    init_tracing();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let err = ezmq_disque::connect(
        DisqueConfig::default()
            .with_seeds([addr.clone()])
            .with_connect_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    assert!(err.is_connection_error(), "{err}");
    assert!(err.is_retryable(), "{err}");
    let text = err.to_string();
    assert!(text.contains(&addr), "{text}");
    assert!(text.contains("connection refused"), "{text}");

    let err = ezmq_disque::connect_url("disque://127.0.0.1:notaport")
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidOption { option: "url", .. }),
        "{err}"
    );
}

#[tokio::test]
async fn bad_topics_and_options_are_rejected() {
    let broker = setup().await;
    let client = broker.client().await;
    let err = client.push("has space", "x".into()).await.unwrap_err();
    assert!(matches!(err, Error::InvalidTopic { .. }), "{err}");
    let err = client
        .push_with(
            "ok-topic",
            "x".into(),
            PushOptions::new()
                .with_backend_options(DisquePushOptions::new().with_retry(Duration::ZERO)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidOption {
                option: "retry",
                ..
            }
        ),
        "{err}"
    );
    let err = client
        .add_consume_listener_with(
            "ok-topic",
            ConsumeOptions::new().with_concurrency(0),
            |_job: Job| async { Ok::<(), std::io::Error>(()) },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidOption { .. }), "{err}");
}

#[tokio::test]
async fn queue_len_and_peek() {
    let broker = setup().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("inspect");
    assert_eq!(client.queue_len(&topic).await.unwrap(), 0);
    assert!(client.peek(&topic, 5).await.unwrap().is_empty());
    for body in ["one", "two", "three"] {
        client.push(&topic, body.into()).await.unwrap();
    }
    assert_eq!(client.queue_len(&topic).await.unwrap(), 3);
    let peeked = client.peek(&topic, 2).await.unwrap();
    let bodies: Vec<_> = peeked.iter().map(|j| j.body().clone()).collect();
    assert_eq!(bodies, [&b"one"[..], &b"two"[..]]);
    assert_eq!(client.peek(&topic, 10).await.unwrap().len(), 3);
    // Peeking does not consume.
    assert_eq!(client.queue_len(&topic).await.unwrap(), 3);
}

#[tokio::test]
async fn maxlen_maps_to_queue_full() {
    let broker = setup().await;
    let client = broker.client().await;
    let topic = broker.unique_topic("maxlen");
    let opts = PushOptions::new().with_backend_options(DisquePushOptions::new().with_maxlen(1));
    client
        .push_with(&topic, "a".into(), opts.clone())
        .await
        .unwrap();
    let err = client
        .push_with(&topic, "b".into(), opts)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::QueueFull { ref topic } if topic.starts_with("maxlen")),
        "{err}"
    );
}

#[tokio::test]
async fn deliveries_settle_themselves_and_count_attempts() {
    let broker = setup().await;
    let backend = DisqueBackend::connect(broker.config()).await.unwrap();
    let topic = Topic::new(broker.unique_topic("raw")).unwrap();
    let source = Source::Topic(topic.clone());
    let wait = Duration::from_secs(5);
    backend
        .publish(
            &topic,
            "x".into(),
            &PushOptions::new()
                .with_backend_options(DisquePushOptions::new().with_retry(Duration::from_secs(30))),
        )
        .await
        .unwrap();
    let jobs = backend.receive(&source, 10, wait).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].job.attempt(), 1);
    let lease = jobs[0].handle.extend_lease().await.unwrap();
    assert_eq!(lease, Duration::from_secs(30));
    // A short retry: back at once (NACK), counted as an attempt.
    jobs[0].handle.retry(Duration::ZERO).await.unwrap();
    let again = backend.receive(&source, 10, wait).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].job.id(), jobs[0].job.id());
    assert_eq!(again[0].job.attempt(), 2);
    // A long retry: re-added with a delay and the next attempt number.
    let start = Instant::now();
    again[0]
        .handle
        .retry(Duration::from_millis(1500))
        .await
        .unwrap();
    let third = backend.receive(&source, 10, wait).await.unwrap();
    assert_eq!(third.len(), 1);
    assert!(
        start.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(third[0].job.attempt(), 3);
    assert_eq!(&third[0].job.body()[..], b"x");
    // Released: back at once. Disque counts the new delivery as an
    // "additional delivery", so the attempt number still grows.
    third[0].handle.release().await.unwrap();
    let fourth = backend.receive(&source, 10, wait).await.unwrap();
    assert_eq!(fourth[0].job.attempt(), 4);
    fourth[0].handle.ack().await.unwrap();
    assert!(backend
        .receive(&source, 10, Duration::from_millis(50))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        backend
            .queue_stats()
            .unwrap()
            .queue_len(&topic)
            .await
            .unwrap(),
        0
    );
    // Blocking fetches run concurrently on dedicated connections and do not
    // hold up other commands.
    let other = Topic::new(broker.unique_topic("raw-other")).unwrap();
    let other_source = Source::Topic(other.clone());
    let (blocked, pushed) = tokio::join!(backend.receive(&other_source, 1, wait), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let start = Instant::now();
        backend
            .publish(&other, "y".into(), &PushOptions::new())
            .await
            .unwrap();
        start.elapsed()
    });
    assert_eq!(blocked.unwrap().len(), 1);
    assert!(pushed < Duration::from_secs(1), "{pushed:?}");
    backend.close().await.unwrap();
    assert!(matches!(
        backend.queue_stats().unwrap().queue_len(&topic).await,
        Err(Error::Shutdown)
    ));
}

#[tokio::test]
async fn at_most_once_jobs_are_not_redelivered() {
    let broker = setup().await;
    let backend = DisqueBackend::connect(broker.config()).await.unwrap();
    let topic = Topic::new(broker.unique_topic("amo")).unwrap();
    let source = Source::Topic(topic.clone());
    let once =
        PushOptions::new().with_backend_options(DisquePushOptions::new().with_at_most_once(true));
    backend.publish(&topic, "once".into(), &once).await.unwrap();
    let jobs = backend
        .receive(&source, 1, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(jobs.len(), 1);
    // Not acknowledged, yet never delivered again (RETRY 0).
    assert!(backend
        .receive(&source, 1, Duration::from_millis(1500))
        .await
        .unwrap()
        .is_empty());
    backend.close().await.unwrap();
}

#[tokio::test]
async fn exclusive_claim_has_one_winner() {
    let broker = setup().await;
    let a = DisqueBackend::connect(broker.config()).await.unwrap();
    let b = DisqueBackend::connect(broker.config()).await.unwrap();
    let key = Topic::internal("cron", &[&broker.unique_topic("tick")]).unwrap();
    let hold = Duration::from_secs(2);
    let (ra, rb) = tokio::join!(a.try_claim(&key, hold), b.try_claim(&key, hold));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert!(ra ^ rb, "exactly one winner: {ra} {rb}");
    assert!(!a.try_claim(&key, hold).await.unwrap());
}

#[tokio::test]
async fn password_is_sent_and_checked() {
    init_tracing();
    use ezmq_disque_server::{EmbeddedDisque, ServerConfig};
    let server = EmbeddedDisque::start(
        ServerConfig::default()
            .with_port(0)
            .with_requirepass(Some("p@ss".into())),
    )
    .await
    .unwrap();
    let addr = server.addr().to_string();
    let client = ezmq_disque::connect_url(&format!("disque://:p%40ss@{addr}"))
        .await
        .unwrap();
    client.push("auth-ok", "x".into()).await.unwrap();
    assert_eq!(client.queue_len("auth-ok").await.unwrap(), 1);
    let err = ezmq_disque::connect(
        DisqueConfig::default()
            .with_seeds([addr.clone()])
            .with_password("wrong"),
    )
    .await
    .unwrap_err();
    assert!(err.is_connection_error(), "{err}");
    assert!(err.to_string().contains(&addr), "{err}");
    // Said as what it is, and not worth retrying.
    assert!(
        matches!(
            err,
            Error::Connect {
                failure: ezmq_disque::ConnectFailure::AuthenticationFailed,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("authentication failed"), "{err}");
    assert!(!err.is_retryable(), "{err}");
    server.shutdown().await;
}
