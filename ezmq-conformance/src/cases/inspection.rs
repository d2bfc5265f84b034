//! Queue inspection and the capability report.

use std::convert::Infallible;
use std::time::Duration;

use ezmq_core::spi::Capability;
use ezmq_core::{Client, Job, MqClient, MqClientExt, PushOptions};

use crate::support::{
    assert_quiet, assert_unsupported, channel, eventually, receive_one, recv_n, shutdown,
    shutdown_all, text, QUIET, SOON,
};
use crate::Ctx;

/// [`Capability::QueueStats`]: 5 messages pushed with no consumer give a
/// queue length of 5; once a listener consumed them, 0. An unknown topic
/// has length 0.
pub async fn queue_len(ctx: Ctx) {
    let client = ctx.client().clone();
    let topic = ctx.topic("counted");
    if !ctx.has(Capability::QueueStats) {
        assert_unsupported(
            client.queue_len(&topic).await,
            Capability::QueueStats,
            "queue_len",
        );
        ctx.skip_lacking(Capability::QueueStats);
        shutdown(&client, Duration::from_secs(5)).await;
        return;
    }
    assert_eq!(
        client.queue_len(&topic).await.expect("queue_len"),
        0,
        "a new topic is empty"
    );
    for i in 0..5 {
        client
            .push(&topic, format!("m{i}").into())
            .await
            .expect("push");
    }
    wait_len(&client, &topic, 5).await;

    let consumer = ctx.connect().await;
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
    recv_n(&mut rx, 5, SOON, "messages").await;
    wait_len(&client, &topic, 0).await;
    shutdown_all(&[&client, &consumer]).await;
}

/// Waits until `queue_len(topic)` is `expected` (stats may lag a little
/// behind confirmed pushes on some brokers); never more than was pushed.
async fn wait_len(client: &Client, topic: &str, expected: u64) {
    eventually(
        Duration::from_secs(10),
        &format!("queue_len == {expected}"),
        || async {
            let len = client.queue_len(topic).await.expect("queue_len");
            assert!(len <= 5, "queue_len {len}: more than the 5 pushed");
            len == expected
        },
    )
    .await;
}

/// [`Capability::Peek`]: `peek(3)` on 5 waiting messages returns the 3
/// oldest, oldest first, and consumes nothing (peeking again gives the
/// same; a listener then gets all 5). `peek` of an empty topic is empty.
pub async fn peek(ctx: Ctx) {
    let client = ctx.client().clone();
    let topic = ctx.topic("peeked");
    if !ctx.has(Capability::Peek) {
        assert_unsupported(client.peek(&topic, 3).await, Capability::Peek, "peek");
        ctx.skip_lacking(Capability::Peek);
        shutdown(&client, Duration::from_secs(5)).await;
        return;
    }
    assert!(
        client.peek(&topic, 3).await.expect("peek").is_empty(),
        "a new topic is empty"
    );
    for i in 0..5 {
        client
            .push_with(
                &topic,
                format!("m{i}").into(),
                PushOptions::new().with_header("n", i.to_string()),
            )
            .await
            .expect("push");
    }
    let bodies = |jobs: &[Job]| jobs.iter().map(|j| text(j.body())).collect::<Vec<_>>();
    let first = client.peek(&topic, 3).await.expect("peek");
    assert_eq!(
        bodies(&first),
        ["m0", "m1", "m2"],
        "the 3 oldest, oldest first"
    );
    assert!(first.iter().all(|j| j.topic().as_str() == topic));
    assert_eq!(
        first[1].headers().get("n"),
        Some("1"),
        "peeked jobs carry their headers"
    );
    let again = client.peek(&topic, 3).await.expect("peek again");
    assert_eq!(bodies(&again), bodies(&first), "peek consumes nothing");
    let all = client.peek(&topic, 10).await.expect("peek 10");
    assert_eq!(bodies(&all), ["m0", "m1", "m2", "m3", "m4"]);

    let consumer = ctx.connect().await;
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
    let mut got = recv_n(&mut rx, 5, SOON, "peeked messages").await;
    got.sort();
    assert_eq!(
        got,
        ["m0", "m1", "m2", "m3", "m4"],
        "peeking consumed nothing"
    );
    assert_quiet(&mut rx, QUIET, "second delivery").await;
    shutdown_all(&[&client, &consumer]).await;
}

/// The capability report matches what the backend hands out: every
/// reported ability has its accessor (`spi::Backend::queue_stats`, `peek`,
/// `exclusive_claim`, `fan_out`, `reply_channel`) and every accessor is
/// reported; delayed delivery and lease extension work exactly when
/// reported. The client reports the backend's name and capabilities.
pub async fn capabilities_are_consistent(ctx: Ctx) {
    let client = ctx.client().clone();
    let backend = client.runtime().backend();
    assert_eq!(client.backend_name(), ctx.broker().name(), "backend name");
    assert_eq!(backend.name(), ctx.broker().name(), "spi::Backend::name");
    let caps = client.capabilities();
    assert_eq!(
        caps,
        backend.capabilities(),
        "client and backend report the same"
    );
    assert_eq!(
        caps,
        ctx.broker().expected_capabilities(),
        "the backend reports the capabilities its tests expect of it"
    );
    let accessors = [
        (Capability::QueueStats, backend.queue_stats().is_some()),
        (Capability::Peek, backend.peek().is_some()),
        (
            Capability::ExclusiveClaim,
            backend.exclusive_claim().is_some(),
        ),
        (Capability::FanOut, backend.fan_out().is_some()),
        (Capability::RequestReply, backend.reply_channel().is_some()),
        (Capability::JobStore, backend.job_store().is_some()),
    ];
    for (capability, present) in accessors {
        assert_eq!(
            caps.has(capability),
            present,
            "{capability}: reported {} but the accessor returns {}",
            caps.has(capability),
            if present { "Some" } else { "None" }
        );
    }
    let runtime = client.runtime();
    assert_eq!(
        runtime.exclusive_claim().is_ok(),
        caps.has(Capability::ExclusiveClaim)
    );
    assert_eq!(runtime.fan_out().is_ok(), caps.has(Capability::FanOut));
    assert_eq!(
        runtime.reply_channel().is_ok(),
        caps.has(Capability::RequestReply)
    );

    let topic = ctx.topic("caps");
    let delayed = client
        .push_delay(&topic, "delayed".into(), Duration::from_secs(1))
        .await;
    if caps.has(Capability::DelayedDelivery) {
        delayed.expect("push_delay on a backend reporting delayed delivery");
    } else {
        assert_unsupported(delayed, Capability::DelayedDelivery, "push_delay");
    }
    client.push(&topic, "plain".into()).await.expect("push");
    let delivery = receive_one(&client, &topic).await;
    let extended = delivery.handle.extend_lease().await;
    if caps.has(Capability::LeaseExtension) {
        extended.expect("extend_lease on a backend reporting lease extension");
    } else {
        assert_unsupported(extended, Capability::LeaseExtension, "extend_lease");
    }
    delivery.handle.ack().await.expect("ack");
    println!("{}: {} reports {caps:?}", ctx.case(), ctx.backend());
    shutdown(&client, Duration::from_secs(5)).await;
}
