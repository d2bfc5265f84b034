//! Listener runtime tests over the in-memory backend, in paused time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::{sleep, Instant};

use super::test_backend::MemBackend;
use super::{DeadLetterRecord, ListenerHandle};
use crate::client::{Client, ClientConfig};
use crate::consume_options::{ConsumeOptions, DeadLetter};
use crate::error::BoxError;
use crate::handler::{handler_fn, Permanent};
use crate::job::Job;
use crate::mq_client::MqClient;
use crate::topic::Topic;

const TOPIC: &str = "orders";
const DLQ: &str = "orders.dead-letter";

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn setup() -> (Client<MemBackend>, Arc<MemBackend>) {
    let client = Client::new(MemBackend::new(), ClientConfig::default());
    let backend = Arc::clone(client.backend());
    (client, backend)
}

fn listen<F, Fut>(client: &Client<MemBackend>, options: ConsumeOptions, f: F) -> ListenerHandle
where
    F: Fn(Job) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), BoxError>> + Send + 'static,
{
    client
        .listen_to(Topic::new(TOPIC).unwrap(), Arc::new(handler_fn(f)), options)
        .unwrap()
}

/// Waits (in virtual time) until `cond` holds; fails after 120 s.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "timed out waiting for {what}"
        );
        sleep(ms(5)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn success_acks() {
    let (client, backend) = setup();
    let listener = listen(&client, ConsumeOptions::new(), |job: Job| async move {
        assert_eq!(&job.body()[..], b"hello");
        Ok(())
    });
    assert_eq!(listener.topic().as_str(), TOPIC);
    let id = backend.put(TOPIC, "hello");
    until("ack", || backend.state().acked == [id.clone()]).await;
    assert!(backend.state().nacked.is_empty());
    client.shutdown(ms(100)).await.unwrap();
    assert!(backend.state().closed);
    assert!(listener.is_finished());
}

#[tokio::test(start_paused = true)]
async fn error_retries_with_backoff_then_dead_letters() {
    let (client, backend) = setup();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&calls);
    let options = ConsumeOptions::new()
        .with_max_attempts(3)
        .with_backoff(ms(100), Duration::from_secs(10));
    let _listener = listen(&client, options, move |job: Job| {
        seen.lock().unwrap().push((Instant::now(), job.attempt()));
        async { Err::<(), BoxError>("boom".into()) }
    });
    let id = backend.put(TOPIC, "hello");
    until("dead letter", || backend.waiting(DLQ).len() == 1).await;

    let calls = calls.lock().unwrap().clone();
    let attempts: Vec<u32> = calls.iter().map(|c| c.1).collect();
    assert_eq!(attempts, [1, 2, 3]);
    // Backoff 100 ms then 200 ms, plus up to 20 % jitter (and fetch latency).
    let gap1 = calls[1].0 - calls[0].0;
    let gap2 = calls[2].0 - calls[1].0;
    assert!(gap1 >= ms(100) && gap1 <= ms(130), "{gap1:?}");
    assert!(gap2 >= ms(200) && gap2 <= ms(250), "{gap2:?}");
    {
        let st = backend.state();
        assert_eq!(st.nacked, [id.clone(), id.clone()]);
        assert_eq!(st.acked, std::slice::from_ref(&id));
    }
    let dead = &backend.waiting(DLQ)[0];
    let record = DeadLetterRecord::from_job(dead).unwrap();
    assert_eq!(record.topic, TOPIC);
    assert_eq!(record.job_id, id.as_str());
    assert_eq!(record.attempts, 3);
    assert_eq!(record.error, "boom");
    assert!(!record.permanent);
    assert_eq!(record.body.as_deref(), Some("hello"));
    assert_eq!(&record.body()[..], b"hello");
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn panic_nacks_and_the_listener_keeps_consuming() {
    let (client, backend) = setup();
    let _listener = listen(&client, ConsumeOptions::new(), |job: Job| async move {
        if &job.body()[..] == b"bad" {
            panic!("bad job");
        }
        Ok(())
    });
    let bad = backend.put(TOPIC, "bad");
    let good = backend.put(TOPIC, "good");
    until("nack of the panicking job", || {
        backend.state().nacked.contains(&bad)
    })
    .await;
    until("ack of the good job", || {
        backend.state().acked.contains(&good)
    })
    .await;
    let later = backend.put(TOPIC, "good");
    until("ack after the panic", || {
        backend.state().acked.contains(&later)
    })
    .await;
    assert!(!backend.state().acked.contains(&bad));
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn panics_dead_letter_with_their_message() {
    let (client, backend) = setup();
    let options = ConsumeOptions::new().with_max_attempts(1);
    let _listener = listen(&client, options, |_job: Job| async move {
        panic!("kaboom {}", 42);
    });
    backend.put(TOPIC, "x");
    until("dead letter", || backend.waiting(DLQ).len() == 1).await;
    let record = DeadLetterRecord::from_job(&backend.waiting(DLQ)[0]).unwrap();
    assert_eq!(record.error, "handler panicked: kaboom 42");
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn permanent_error_dead_letters_at_once() {
    let (client, backend) = setup();
    let options = ConsumeOptions::new().with_dead_letter_topic("failed");
    let _listener = listen(&client, options, |_job: Job| async move {
        Err(Permanent::new("no such order").into())
    });
    let id = backend.put(TOPIC, vec![0xff_u8, 0x00]);
    until("dead letter", || backend.waiting("failed").len() == 1).await;
    let record = DeadLetterRecord::from_job(&backend.waiting("failed")[0]).unwrap();
    assert!(record.permanent);
    assert_eq!(record.attempts, 1);
    assert_eq!(record.error, "permanent failure: no such order");
    assert_eq!(record.body, None);
    assert_eq!(record.body_bytes.as_deref(), Some(&[0xff, 0x00][..]));
    {
        let st = backend.state();
        assert!(st.nacked.is_empty());
        assert_eq!(st.acked, [id]);
    }
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn drop_dead_letter_acks_without_pushing() {
    let (client, backend) = setup();
    let options = ConsumeOptions::new().with_dead_letter(DeadLetter::Drop);
    let _listener = listen(&client, options, |_job: Job| async move {
        Err(Permanent::new("bad").into())
    });
    let id = backend.put(TOPIC, "x");
    until("ack", || backend.state().acked == [id.clone()]).await;
    assert!(backend.waiting(DLQ).is_empty());
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn concurrency_limit_holds_and_fetch_asks_only_for_free_slots() {
    let (client, backend) = setup();
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (Arc::clone(&running), Arc::clone(&peak));
    let options = ConsumeOptions::new().with_concurrency(3);
    let _listener = listen(&client, options, move |_job: Job| {
        let (r, p) = (Arc::clone(&r), Arc::clone(&p));
        async move {
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            sleep(ms(100)).await;
            r.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
    });
    for i in 0..10 {
        backend.put(TOPIC, format!("job {i}"));
    }
    until("all acked", || backend.state().acked.len() == 10).await;
    assert_eq!(peak.load(Ordering::SeqCst), 3);
    {
        let st = backend.state();
        for &(active, max) in &st.fetches {
            assert!(
                max >= 1 && active + max <= 3,
                "fetch of {max} with {active} active"
            );
        }
    }
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn heartbeats_a_long_handler() {
    let (client, backend) = setup();
    let options = ConsumeOptions::new().with_heartbeat_after(Duration::from_secs(1));
    let _listener = listen(&client, options, |_job: Job| async move {
        sleep(Duration::from_secs(10)).await;
        Ok(())
    });
    let id = backend.put(TOPIC, "slow");
    until("ack", || backend.state().acked == [id.clone()]).await;
    // Window 4 s: heartbeats at 1, 3, 5, 7 and 9 s.
    let beats = backend.state().working.len();
    assert_eq!(beats, 5);
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn heartbeats_stop_for_jobs_never_redelivered() {
    let (client, backend) = setup();
    backend.state().retry_window = Duration::ZERO;
    let options = ConsumeOptions::new().with_heartbeat_after(Duration::from_secs(1));
    let _listener = listen(&client, options, |_job: Job| async move {
        sleep(Duration::from_secs(10)).await;
        Ok(())
    });
    let id = backend.put(TOPIC, "slow");
    until("ack", || backend.state().acked == [id.clone()]).await;
    assert_eq!(backend.state().working.len(), 1);
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn fetch_errors_back_off_and_the_listener_resumes() {
    let (client, backend) = setup();
    backend.state().failing_fetches = 4;
    let start = Instant::now();
    let _listener = listen(&client, ConsumeOptions::new(), |_job: Job| async { Ok(()) });
    let id = backend.put(TOPIC, "x");
    until("ack", || backend.state().acked == [id.clone()]).await;
    // 100 + 200 + 400 + 800 ms of backoff before the fifth fetch.
    assert!(start.elapsed() >= ms(1500), "{:?}", start.elapsed());
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_an_in_flight_handler_finish() {
    let (client, backend) = setup();
    let listener = listen(&client, ConsumeOptions::new(), |_job: Job| async move {
        sleep(Duration::from_secs(2)).await;
        Ok(())
    });
    let id = backend.put(TOPIC, "x");
    until("handler running", || listener.in_flight() == 1).await;
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    {
        let st = backend.state();
        assert_eq!(st.acked, [id]);
        assert!(st.nacked.is_empty());
        assert!(st.closed);
    }
    assert!(!listener.is_running());
    assert!(listener.is_finished());
    assert_eq!(listener.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_nacks_a_handler_that_exceeds_the_grace() {
    let (client, backend) = setup();
    let listener = listen(&client, ConsumeOptions::new(), |_job: Job| async move {
        sleep(Duration::from_secs(60)).await;
        Ok(())
    });
    let id = backend.put(TOPIC, "x");
    until("handler running", || listener.in_flight() == 1).await;
    let start = Instant::now();
    client.shutdown(Duration::from_secs(1)).await.unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    {
        let st = backend.state();
        assert!(st.acked.is_empty());
        assert_eq!(st.nacked, [id]);
        assert!(st.closed);
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_nacks_jobs_waiting_for_backoff_at_once() {
    let (client, backend) = setup();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let options =
        ConsumeOptions::new().with_backoff(Duration::from_secs(10), Duration::from_secs(10));
    let listener = listen(&client, options, move |_job: Job| {
        c.fetch_add(1, Ordering::SeqCst);
        async { Err::<(), BoxError>("boom".into()) }
    });
    let id = backend.put(TOPIC, "x");
    until("first failure", || {
        calls.load(Ordering::SeqCst) == 1 && listener.in_flight() == 0
    })
    .await;
    sleep(ms(50)).await;
    assert!(
        backend.state().nacked.is_empty(),
        "NACKed before the backoff"
    );
    let start = Instant::now();
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(backend.state().nacked, [id]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn jobs_fetched_while_stopping_are_given_back_unrun() {
    let (client, backend) = setup();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let options = ConsumeOptions::new().with_fetch_wait(Duration::from_secs(1));
    let listener = listen(&client, options, move |_job: Job| {
        c.fetch_add(1, Ordering::SeqCst);
        async { Ok(()) }
    });
    until("fetch in flight", || !backend.state().fetches.is_empty()).await;
    let stopper = listener.clone();
    let stop = tokio::spawn(async move { stopper.stop(Duration::from_secs(5)).await });
    until("stop requested", || !listener.is_running()).await;
    let id = backend.put(TOPIC, "late");
    stop.await.unwrap();
    assert!(listener.is_finished());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    {
        let st = backend.state();
        assert_eq!(st.requeued, [id]);
        assert!(st.acked.is_empty() && st.nacked.is_empty());
    }
    assert_eq!(backend.waiting(TOPIC).len(), 1);
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn stopped_listener_consumes_no_more_but_the_client_lives_on() {
    let (client, backend) = setup();
    let listener = listen(&client, ConsumeOptions::new(), |_job: Job| async { Ok(()) });
    listener.stop(ms(100)).await;
    assert!(listener.is_finished());
    listener.stop(ms(100)).await; // idempotent
    backend.put(TOPIC, "x");
    sleep(Duration::from_secs(3)).await;
    assert!(backend.state().acked.is_empty());
    let id = backend.put("other", "y");
    client
        .listen_to(
            Topic::new("other").unwrap(),
            Arc::new(handler_fn(|_job: Job| async { Ok::<(), BoxError>(()) })),
            ConsumeOptions::new(),
        )
        .unwrap();
    until("ack on the other listener", || {
        backend.state().acked == [id.clone()]
    })
    .await;
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn dropping_the_handle_does_not_stop_the_listener() {
    let (client, backend) = setup();
    drop(listen(&client, ConsumeOptions::new(), |_job: Job| async {
        Ok(())
    }));
    let id = backend.put(TOPIC, "x");
    until("ack", || backend.state().acked == [id.clone()]).await;
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn invalid_dead_letter_topic_is_refused_at_start() {
    let (client, _backend) = setup();
    let handler = Arc::new(handler_fn(|_job: Job| async { Ok::<(), BoxError>(()) }));
    let bad = ConsumeOptions::new().with_dead_letter_topic("not valid");
    assert!(client
        .listen_to(Topic::new(TOPIC).unwrap(), handler.clone(), bad)
        .is_err());
    let long = Topic::new("x".repeat(195)).unwrap();
    assert!(client
        .listen_to(long, handler.clone(), ConsumeOptions::new())
        .is_err());
    client.shutdown(ms(100)).await.unwrap();
    assert!(client
        .listen_to(Topic::new(TOPIC).unwrap(), handler, ConsumeOptions::new())
        .is_err());
}

#[tokio::test(start_paused = true)]
async fn acks_go_out_in_batches_and_hold_their_slots() {
    let (client, backend) = setup();
    let options = ConsumeOptions::new().with_concurrency(8);
    let _listener = listen(&client, options, |_job: Job| async { Ok(()) });
    for i in 0..40 {
        backend.put(TOPIC, format!("job {i}"));
    }
    until("all acked", || backend.state().acked.len() == 40).await;
    {
        let st = backend.state();
        assert_eq!(st.ack_batches.iter().sum::<usize>(), 40);
        assert!(st.ack_batches.len() < 40, "{:?}", st.ack_batches);
        // A slot is free again only once its job is ACKed.
        for &(active, max) in &st.fetches {
            assert!(active + max <= 8, "fetch of {max} with {active} active");
        }
    }
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_failed_batch_ack_is_retried_job_by_job() {
    let (client, backend) = setup();
    backend.state().failing_ack_batches = 1;
    let _listener = listen(&client, ConsumeOptions::new(), |_job: Job| async { Ok(()) });
    let id = backend.put(TOPIC, "x");
    until("ack", || backend.state().acked == [id.clone()]).await;
    assert_eq!(backend.state().ack_batches, [1]);
    client.shutdown(ms(100)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_flushes_acks_before_closing_the_backend() {
    let (client, backend) = setup();
    let listener = listen(
        &client,
        ConsumeOptions::new().with_concurrency(16),
        |_job: Job| async move {
            sleep(ms(50)).await;
            Ok(())
        },
    );
    let ids: Vec<_> = (0..16)
        .map(|i| backend.put(TOPIC, format!("{i}")))
        .collect();
    until("handlers running", || listener.in_flight() == 16).await;
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    let st = backend.state();
    let mut acked = st.acked.clone();
    acked.sort();
    let mut expected = ids;
    expected.sort();
    assert_eq!(acked, expected);
    assert!(st.nacked.is_empty());
    assert!(st.closed);
}

#[tokio::test(start_paused = true)]
async fn heartbeats_each_job_on_its_own_schedule() {
    let (client, backend) = setup();
    // Window 40 s: after its first heartbeat a job is next due 20 s later,
    // so the second job (due 1 s after it starts) must wake the ticker.
    backend.state().retry_window = Duration::from_secs(40);
    let options = ConsumeOptions::new()
        .with_concurrency(2)
        .with_heartbeat_after(Duration::from_secs(1));
    let _listener = listen(&client, options, |job: Job| async move {
        let secs = if &job.body()[..] == b"long" { 10 } else { 5 };
        sleep(Duration::from_secs(secs)).await;
        Ok(())
    });
    let long = backend.put(TOPIC, "long");
    sleep(Duration::from_secs(2)).await;
    assert_eq!(backend.state().working, std::slice::from_ref(&long));
    let short = backend.put(TOPIC, "short");
    sleep(ms(1500)).await;
    assert_eq!(backend.state().working, [long.clone(), short.clone()]);
    until("both acked", || backend.state().acked.len() == 2).await;
    assert_eq!(backend.state().working, [long, short]);
    client.shutdown(ms(100)).await.unwrap();
}
