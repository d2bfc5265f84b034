//! The job layer on RabbitMQ (`EZMQ_TEST_AMQP_URL`): the id core stamped
//! as AMQP `message_id` and job id, batch publishes with one confirm wait,
//! a paused consumer giving back its prefetch, prefetch re-sizing, and the
//! refused delayed broadcast.

mod support;

use std::time::{Duration, Instant};

use ezmq_core::spi::{Backend, Source};
use ezmq_core::{Error, JobId, JobMeta, PushOptions, Topic, MESSAGE_ID_HEADER};
use ezmq_rabbitmq::{RabbitBackend, DELAYED_BROADCAST};
use lapin::options::{BasicGetOptions, BasicNackOptions, BasicPublishOptions};
use lapin::BasicProperties;
use support::src;

const WAIT: Duration = Duration::from_secs(10);

/// Publishes `body` to `queue` with a plain AMQP client (a foreign
/// message: no ezmq headers), with `message_id` when given.
async fn publish_raw(queue: &str, body: &[u8], message_id: Option<&str>) {
    let (conn, channel) = support::raw_channel().await;
    let mut properties = BasicProperties::default();
    if let Some(id) = message_id {
        properties = properties.with_message_id(id.into());
    }
    channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            body,
            properties,
        )
        .await
        .expect("raw publish")
        .await
        .expect("raw publish sent");
    let _ = conn.close(200, "done".into()).await;
}

#[tokio::test]
async fn one_id_as_message_id_and_job_id_foreign_ones_kept() {
    let Some(config) = support::config().await else {
        return;
    };
    let backend = RabbitBackend::connect(config).await.unwrap();
    let topic = support::topic("ids");
    let t = Topic::new(&topic).unwrap();

    let mut options = PushOptions::new().with_header("n", "1");
    let id = JobMeta::stamp(&mut options);
    assert_eq!(backend.publish(&t, "x".into(), &options).await.unwrap(), id);
    // On the wire: the stamped id is the AMQP message id.
    let (conn, channel) = support::raw_channel().await;
    let got = channel
        .basic_get(topic.as_str().into(), BasicGetOptions { no_ack: false })
        .await
        .unwrap()
        .expect("the message");
    let wire_id = got.delivery.properties.message_id().clone();
    assert_eq!(wire_id.as_ref().map(|s| s.as_str()), Some(id.as_str()));
    got.delivery
        .nack(BasicNackOptions {
            multiple: false,
            requeue: true,
        })
        .await
        .unwrap();
    let _ = conn.close(200, "done".into()).await;
    // Through a retry: the same id.
    let first = backend.receive(&src(&topic), 1, WAIT).await.unwrap();
    assert_eq!(first[0].job.id(), &id);
    first[0]
        .handle
        .retry(Duration::from_millis(20))
        .await
        .unwrap();
    let again = backend.receive(&src(&topic), 1, WAIT).await.unwrap();
    assert_eq!(again[0].job.id(), &id, "a retry keeps the id");
    assert_eq!(again[0].job.headers().get("n"), Some("1"));
    again[0].handle.ack().await.unwrap();

    // Foreign messages: the AMQP message id, else one made up once and
    // kept through a retry.
    publish_raw(&topic, b"foreign", Some("foreign-1")).await;
    let got = backend.receive(&src(&topic), 1, WAIT).await.unwrap();
    assert_eq!(got[0].job.id().as_str(), "foreign-1");
    got[0].handle.ack().await.unwrap();
    publish_raw(&topic, b"anonymous", None).await;
    let got = backend.receive(&src(&topic), 1, WAIT).await.unwrap();
    let made_up = got[0].job.id().clone();
    assert!(made_up.created_at().is_some(), "a UUIDv7: {made_up}");
    assert_eq!(got[0].job.headers().get(MESSAGE_ID_HEADER), None);
    got[0]
        .handle
        .retry(Duration::from_millis(20))
        .await
        .unwrap();
    let again = backend.receive(&src(&topic), 1, WAIT).await.unwrap();
    assert_eq!(again[0].job.id(), &made_up, "kept through a retry");
    again[0].handle.ack().await.unwrap();

    backend.close().await.unwrap();
    support::cleanup(&[topic], &[]).await;
}

/// Stamped jobs for a batch: `n` bodies, every third one delayed.
fn batch(n: usize) -> (Vec<(bytes::Bytes, PushOptions)>, Vec<JobId>) {
    let mut ids = Vec::new();
    let jobs = (0..n)
        .map(|i| {
            let mut options = PushOptions::new().with_header("i", i.to_string());
            if i % 3 == 2 {
                options = options.with_delay(Duration::from_millis(300));
            }
            ids.push(JobMeta::stamp(&mut options));
            (format!("{i}").into(), options)
        })
        .collect();
    (jobs, ids)
}

#[tokio::test]
async fn batch_publishes_immediate_and_delayed_jobs_with_their_ids() {
    let Some(config) = support::config().await else {
        return;
    };
    let backend = RabbitBackend::connect(config).await.unwrap();
    let topic = support::topic("batch-publish");
    let t = Topic::new(&topic).unwrap();
    let (jobs, ids) = batch(30);
    let results = backend.publish_batch(&t, &jobs).await;
    let returned: Vec<JobId> = results.into_iter().map(Result::unwrap).collect();
    assert_eq!(returned, ids, "each job's stamped id, in order");
    let mut seen = Vec::new();
    let deadline = Instant::now() + WAIT;
    while seen.len() < 30 && Instant::now() < deadline {
        for d in backend
            .receive(&src(&topic), 30, Duration::from_secs(1))
            .await
            .unwrap()
        {
            let i: usize = d.job.headers().get("i").unwrap().parse().unwrap();
            assert_eq!(d.job.id(), &ids[i], "job {i} has its id");
            assert_eq!(std::str::from_utf8(d.job.body()).unwrap(), i.to_string());
            d.handle.ack().await.unwrap();
            seen.push(i);
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..30).collect::<Vec<_>>());

    // The one confirm wait against one wait per job (printed, not
    // asserted: a shared 2-core machine is no place for a speed bound).
    let n = 500;
    let immediate = |n: usize| {
        (0..n)
            .map(|i| {
                let mut options = PushOptions::new();
                JobMeta::stamp(&mut options);
                (bytes::Bytes::from(format!("{i}")), options)
            })
            .collect::<Vec<_>>()
    };
    let jobs = immediate(n);
    let started = Instant::now();
    for (body, options) in &jobs {
        backend.publish(&t, body.clone(), options).await.unwrap();
    }
    let one_by_one = started.elapsed();
    let jobs = immediate(n);
    let started = Instant::now();
    for result in backend.publish_batch(&t, &jobs).await {
        result.unwrap();
    }
    let batched = started.elapsed();
    println!("{n} publishes: one by one {one_by_one:?}, one batch {batched:?}");
    backend.close().await.unwrap();
    support::cleanup(&[topic], &[]).await;
}

#[tokio::test]
async fn a_paused_consumer_gives_back_its_prefetch_and_resumes() {
    let Some(config) = support::config().await else {
        return;
    };
    let a = RabbitBackend::connect(config.clone()).await.unwrap();
    let b = RabbitBackend::connect(config).await.unwrap();
    let topic = support::topic("pause");
    let t = Topic::new(&topic).unwrap();
    let source: Source = src(&topic);
    // A's consumer: prefetch 4 (its first fetch's size); nothing there yet.
    assert!(a
        .receive(&source, 4, Duration::from_millis(200))
        .await
        .unwrap()
        .is_empty());
    for i in 0..4 {
        a.publish(&t, format!("{i}").into(), &PushOptions::new())
            .await
            .unwrap();
    }
    // A takes one, and the broker has sent it the other three.
    let running = a.receive(&source, 1, WAIT).await.unwrap();
    assert_eq!(running.len(), 1);
    a.pause_receiving(&source).await.unwrap();
    // B gets the three at once, A's running job is still A's.
    let mut got = Vec::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < 3 && Instant::now() < deadline {
        for d in b
            .receive(&source, 4, Duration::from_millis(500))
            .await
            .unwrap()
        {
            got.push(String::from_utf8(d.job.body().to_vec()).unwrap());
            d.handle.ack().await.unwrap();
        }
    }
    assert_eq!(got.len(), 3, "B got A's prefetched jobs: {got:?}");
    assert!(!got.contains(&String::from_utf8(running[0].job.body().to_vec()).unwrap()));
    // The running job's ack still goes out on A's channel.
    running[0].handle.ack().await.unwrap();
    b.close().await.unwrap();
    // The next receive starts a consumer again.
    a.publish(&t, "after".into(), &PushOptions::new())
        .await
        .unwrap();
    let after = a.receive(&source, 4, WAIT).await.unwrap();
    assert_eq!(&after[0].job.body()[..], b"after");
    after[0].handle.ack().await.unwrap();
    a.close().await.unwrap();
    support::cleanup(&[topic], &[]).await;
}

#[tokio::test]
async fn the_prefetch_shrinks_once_the_admission_stays_smaller() {
    let Some(config) = support::config().await else {
        return;
    };
    let a = RabbitBackend::connect(config.clone()).await.unwrap();
    let b = RabbitBackend::connect(config).await.unwrap();
    let topic = support::topic("shrink");
    let t = Topic::new(&topic).unwrap();
    let source: Source = src(&topic);
    // Prefetch 8 at first, then fetches of 1 for over a second.
    let started = Instant::now();
    assert!(a
        .receive(&source, 8, Duration::from_millis(50))
        .await
        .unwrap()
        .is_empty());
    while started.elapsed() < Duration::from_millis(1_500) {
        assert!(a
            .receive(&source, 1, Duration::from_millis(200))
            .await
            .unwrap()
            .is_empty());
    }
    // Re-sized to 1: A holds one job, B (prefetch 8) gets the other 7.
    assert!(b
        .receive(&source, 8, Duration::from_millis(200))
        .await
        .unwrap()
        .is_empty());
    for i in 0..8 {
        a.publish(&t, format!("{i}").into(), &PushOptions::new())
            .await
            .unwrap();
    }
    let held = a.receive(&source, 1, WAIT).await.unwrap();
    assert_eq!(held.len(), 1);
    let mut from_b = 0;
    let deadline = Instant::now() + WAIT;
    while from_b < 7 && Instant::now() < deadline {
        for d in b
            .receive(&source, 8, Duration::from_millis(500))
            .await
            .unwrap()
        {
            from_b += 1;
            d.handle.ack().await.unwrap();
        }
    }
    assert_eq!(from_b, 7, "A's consumer holds no more than it may take");
    held[0].handle.ack().await.unwrap();
    a.close().await.unwrap();
    b.close().await.unwrap();
    support::cleanup(&[topic], &[]).await;
}

#[tokio::test]
async fn a_consumer_nobody_fetches_from_gives_its_prefetch_back() {
    let Some(config) = support::config().await else {
        return;
    };
    let a = RabbitBackend::connect(config.clone()).await.unwrap();
    let b = RabbitBackend::connect(config).await.unwrap();
    let topic = support::topic("idle");
    let t = Topic::new(&topic).unwrap();
    let source: Source = src(&topic);
    // A fetches once (a consumer with prefetch 4), then never again, like
    // a listener that stopped.
    assert!(a
        .receive(&source, 4, Duration::from_millis(100))
        .await
        .unwrap()
        .is_empty());
    for i in 0..3 {
        a.publish(&t, format!("{i}").into(), &PushOptions::new())
            .await
            .unwrap();
    }
    // B gets them once A's idle consumer gave them back (about a second).
    let started = Instant::now();
    let mut got = 0;
    while got < 3 && started.elapsed() < WAIT {
        for d in b
            .receive(&source, 4, Duration::from_millis(500))
            .await
            .unwrap()
        {
            got += 1;
            d.handle.ack().await.unwrap();
        }
    }
    assert_eq!(got, 3, "B got what idle A held");
    println!("given back after {:?}", started.elapsed());
    // A's next receive opens a consumer again.
    a.publish(&t, "again".into(), &PushOptions::new())
        .await
        .unwrap();
    b.close().await.unwrap();
    let again = a.receive(&source, 4, WAIT).await.unwrap();
    assert_eq!(&again[0].job.body()[..], b"again");
    again[0].handle.ack().await.unwrap();
    a.close().await.unwrap();
    support::cleanup(&[topic], &[]).await;
}

#[tokio::test]
async fn a_delayed_broadcast_is_refused_with_a_typed_error() {
    let Some(config) = support::config().await else {
        return;
    };
    let backend = RabbitBackend::connect(config).await.unwrap();
    let topic = Topic::new(support::topic("delayed-bcast")).unwrap();
    let err = backend
        .fan_out()
        .unwrap()
        .publish_to_groups(
            &topic,
            "x".into(),
            &PushOptions::new().with_delay(Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
    match &err {
        Error::InvalidOption { option, reason } => {
            assert_eq!(*option, "delay");
            assert_eq!(reason, DELAYED_BROADCAST);
        }
        other => panic!("not an InvalidOption: {other:?}"),
    }
    assert!(err
        .to_string()
        .contains("RabbitMQ cannot delay a broadcast"));
    backend.close().await.unwrap();
}
