//! Lifecycle: graceful shutdown and broker restarts.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::time::{Duration, Instant};

use ezmq_core::{Client, ConsumeOptions, Job, MqClient, MqClientExt};

use crate::support::{channel, drain, recv, shutdown, shutdown_all, text, SOON};
use crate::Ctx;

/// Graceful shutdown loses nothing: 20 messages, a consumer running 4 slow
/// handlers at once shuts down (grace 10 s) after finishing 4, with
/// handlers running; those finish within the grace; a second client then
/// receives every message the first did not finish, and none it finished
/// (those were acknowledged before shutdown returned).
pub async fn graceful_shutdown_loses_nothing(ctx: Ctx) {
    const N: usize = 20;
    let producer = ctx.client().clone();
    let a = ctx.connect().await;
    let b = ctx.connect().await;
    let topic = ctx.topic("drain");
    for i in 0..N {
        producer
            .push(&topic, format!("job-{i}").into())
            .await
            .expect("push");
    }

    let (a_tx, mut a_rx) = channel();
    a.add_consume_listener_with(
        &topic,
        ConsumeOptions::new().with_concurrency(4),
        move |job: Job| {
            let a_tx = a_tx.clone();
            async move {
                let body = text(job.body());
                let _ = a_tx.send((false, body.clone()));
                // The work: slow enough that most jobs are still waiting when
                // the shutdown starts.
                tokio::time::sleep(Duration::from_millis(300)).await;
                let _ = a_tx.send((true, body));
                Ok::<(), Infallible>(())
            }
        },
    )
    .await
    .expect("add listener on A");
    // Shut down once A finished 4 jobs and has handlers running.
    let mut started_by_a = BTreeSet::new();
    let mut done_by_a = BTreeSet::new();
    while done_by_a.len() < 4 || started_by_a.len() == done_by_a.len() {
        let (finished, body) = recv(&mut a_rx, SOON, "A to run its first jobs").await;
        if finished {
            done_by_a.insert(body);
        } else {
            started_by_a.insert(body);
        }
    }
    let grace = Duration::from_secs(10);
    let started = Instant::now();
    shutdown(&a, grace).await;
    let took = started.elapsed();
    assert!(
        took < grace + Duration::from_secs(5),
        "shutdown took {took:?} with a {grace:?} grace"
    );
    // Every handler A started had the grace to finish, before shutdown returned.
    for (finished, body) in drain(&mut a_rx) {
        if finished {
            done_by_a.insert(body);
        } else {
            started_by_a.insert(body);
        }
    }
    assert_eq!(
        started_by_a, done_by_a,
        "handlers running at shutdown must finish within the grace"
    );
    assert!(
        done_by_a.len() < N,
        "A finished everything before the shutdown; test too fast"
    );

    let (b_tx, mut b_rx) = channel();
    b.add_consume_listener_with(
        &topic,
        ConsumeOptions::new().with_concurrency(16),
        move |job: Job| {
            let b_tx = b_tx.clone();
            async move {
                let _ = b_tx.send(text(job.body()));
                Ok::<(), Infallible>(())
            }
        },
    )
    .await
    .expect("add listener on B");
    let mut done_by_b = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + SOON;
    while done_by_a.len() + done_by_b.len() < N {
        match tokio::time::timeout_at(deadline, b_rx.recv()).await {
            Ok(Some(body)) => {
                assert!(
                    !done_by_a.contains(&body),
                    "{body} was finished by A before its shutdown returned, yet redelivered"
                );
                assert!(
                    done_by_b.insert(body.clone()),
                    "{body} delivered twice to B"
                );
            }
            _ => {
                let missing: Vec<String> = (0..N)
                    .map(|i| format!("job-{i}"))
                    .filter(|j| !done_by_a.contains(j) && !done_by_b.contains(j))
                    .collect();
                panic!("lost after A's graceful shutdown: {missing:?}");
            }
        }
    }
    println!(
        "{}: A finished {} jobs, B the other {}",
        ctx.case(),
        done_by_a.len(),
        done_by_b.len()
    );
    shutdown_all(&[&producer, &b]).await;
}

/// Bound on how long after the broker is back a listener delivers again:
/// the 1 s goal plus room for a loaded machine.
const RESUME_WITHIN: Duration = Duration::from_secs(2);

/// A listener resumes after the broker restarts
/// ([`Broker::restart`](crate::Broker::restart); `None`: skip): a message
/// pushed after the restart (retrying while the broker comes back) reaches
/// the listener started before it, within 2 s of the push
/// being accepted. When the broker keeps messages
/// ([`Broker::restart_keeps_messages`](crate::Broker::restart_keeps_messages)),
/// a message confirmed before the restart is delivered after it too.
pub async fn resumes_after_broker_restart(ctx: Ctx) {
    let producer = ctx.client().clone();
    let consumer = ctx.connect().await;
    let topic = ctx.topic("resume");
    let kept_topic = ctx.topic("kept");
    let (tx, mut rx) = channel();
    consumer
        .add_consume_listener(&topic, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(text(job.body()));
                Ok::<(), Infallible>(())
            }
        })
        .await
        .expect("add listener");
    producer.push(&topic, "before".into()).await.expect("push");
    assert_eq!(
        recv(&mut rx, SOON, "the message pushed before the restart").await,
        "before"
    );
    let keeps = ctx.broker().restart_keeps_messages();
    if keeps {
        producer
            .push(&kept_topic, "kept".into())
            .await
            .expect("push");
    }

    match ctx.broker().restart().await {
        None => {
            ctx.skip_because("cannot be restarted by the test");
            shutdown_all(&[&producer, &consumer]).await;
            return;
        }
        Some(Err(e)) => panic!("restarting the broker failed: {e}"),
        Some(Ok(())) => {}
    }

    push_until_accepted(&producer, &topic, "after").await;
    // The broker takes pushes again: the listener, which has been failing
    // to fetch since the restart began, is back within about a second
    // (`ConsumeOptions::fetch_error_backoff` tops out at 1 s).
    let accepted = Instant::now();
    assert_eq!(
        recv(
            &mut rx,
            Duration::from_secs(60),
            "the listener to resume after the restart"
        )
        .await,
        "after"
    );
    let resumed = accepted.elapsed();
    println!(
        "{}: delivered {resumed:?} after the broker took the push",
        ctx.case()
    );
    assert!(
        resumed < RESUME_WITHIN,
        "the listener resumed {resumed:?} after the broker was back (goal 1 s)"
    );
    if keeps {
        let reader = ctx.connect().await;
        let (tx, mut kept_rx) = channel();
        reader
            .add_consume_listener(&kept_topic, move |job: Job| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(text(job.body()));
                    Ok::<(), Infallible>(())
                }
            })
            .await
            .expect("add listener");
        assert_eq!(
            recv(
                &mut kept_rx,
                SOON,
                "the message confirmed before the restart"
            )
            .await,
            "kept"
        );
        shutdown(&reader, Duration::from_secs(5)).await;
    }
    shutdown_all(&[&producer, &consumer]).await;
}

/// Pushes, retrying for up to 60 s while the broker comes back.
async fn push_until_accepted(client: &Client, topic: &str, body: &'static str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match client.push(topic, body.into()).await {
            Ok(_) => return,
            Err(_) if tokio::time::Instant::now() < deadline => {
                // Polling a broker that is coming back: nothing to await.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("the client could not push 60 s after the restart: {e}"),
        }
    }
}
