//! Time: delayed delivery and leases of long handlers.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use ezmq_core::spi::Capability;
use ezmq_core::{Job, MqClient, MqClientExt, PushOptions};

use crate::support::{
    assert_quiet, assert_unsupported, channel, receive_one, recv, shutdown, shutdown_all, text,
    QUIET, SOON,
};
use crate::Ctx;

/// [`Capability::DelayedDelivery`]: a message pushed with a 1 s delay is
/// never delivered before 1 s (minus the broker's
/// [`clock_slack`](crate::Broker::clock_slack)) from the start of the push
/// and arrives within 15 s; pushed after a message delayed by 1 h, it
/// arrives first (and the 1 h one does not arrive).
pub async fn delayed_delivery_never_early(ctx: Ctx) {
    let client = ctx.client().clone();
    let topic = ctx.topic("delayed");
    if !ctx.has(Capability::DelayedDelivery) {
        assert_unsupported(
            client
                .push_delay(&topic, "x".into(), Duration::from_secs(1))
                .await,
            Capability::DelayedDelivery,
            "push_delay",
        );
        ctx.skip_lacking(Capability::DelayedDelivery);
        shutdown(&client, Duration::from_secs(5)).await;
        return;
    }
    let consumer = ctx.connect().await;
    let (tx, mut rx) = channel();
    consumer
        .add_consume_listener(&topic, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send((Instant::now(), job));
                Ok::<(), Infallible>(())
            }
        })
        .await
        .expect("add listener");

    let hour = Duration::from_secs(3600);
    client
        .push_with(
            &topic,
            "in an hour".into(),
            PushOptions::new().with_delay(hour).with_ttl(2 * hour),
        )
        .await
        .expect("push with a 1 h delay");
    let delay = Duration::from_secs(1);
    let pushed_at = Instant::now();
    client
        .push_delay(&topic, "in a second".into(), delay)
        .await
        .expect("push with a 1 s delay");

    let (arrived, job) = recv(&mut rx, Duration::from_secs(15), "the 1 s delayed message").await;
    assert_eq!(
        text(job.body()),
        "in a second",
        "the 1 s message must arrive before the 1 h one"
    );
    let after = arrived - pushed_at;
    let earliest = delay.saturating_sub(ctx.broker().clock_slack());
    assert!(
        after >= earliest,
        "delivered {after:?} after the push began, before its {delay:?} delay"
    );
    println!("{}: 1 s delay delivered after {after:?}", ctx.case());
    assert_quiet(&mut rx, QUIET, "message (the 1 h one, early?)").await;
    shutdown_all(&[&client, &consumer]).await;
}

/// [`Capability::LeaseExtension`]: with short-lease clients
/// ([`Broker::connect_with_short_lease`](crate::Broker::connect_with_short_lease)),
/// a handler running 3× the lease is not delivered a second time to
/// either of two consumers (the listener extends the lease while it runs).
///
/// Without the capability, extending the lease of a delivery fails with
/// [`Error::Unsupported`](ezmq_core::Error::Unsupported); without a short-lease client, the case skips.
pub async fn long_handler_gets_no_duplicate(ctx: Ctx) {
    let client = ctx.client().clone();
    if !ctx.has(Capability::LeaseExtension) {
        let topic = ctx.topic("nolease");
        client.push(&topic, "x".into()).await.expect("push");
        let delivery = receive_one(&client, &topic).await;
        assert_unsupported(
            delivery.handle.extend_lease().await,
            Capability::LeaseExtension,
            "extend_lease",
        );
        delivery.handle.ack().await.expect("ack");
        ctx.skip_lacking(Capability::LeaseExtension);
        shutdown(&client, Duration::from_secs(5)).await;
        return;
    }
    let Some(producer) = ctx.connect_with_short_lease().await else {
        ctx.skip_because("has no short-lease client (Broker::connect_with_short_lease)");
        shutdown(&client, Duration::from_secs(5)).await;
        return;
    };
    let lease = ctx.broker().short_lease();
    let work = lease * 3 + Duration::from_millis(200);
    let topic = ctx.topic("long");
    let (tx, mut rx) = channel();
    let (done_tx, mut done_rx) = channel();
    let mut consumers = Vec::new();
    for name in ["A", "B"] {
        let consumer = ctx
            .connect_with_short_lease()
            .await
            .expect("a second short-lease client");
        let (tx, done_tx) = (tx.clone(), done_tx.clone());
        consumer
            .add_consume_listener(&topic, move |job: Job| {
                let (tx, done_tx) = (tx.clone(), done_tx.clone());
                async move {
                    let _ = tx.send((name, job.attempt()));
                    // The work: three leases long.
                    tokio::time::sleep(work).await;
                    let _ = done_tx.send(());
                    Ok::<(), Infallible>(())
                }
            })
            .await
            .expect("add listener");
        consumers.push(consumer);
    }
    producer
        .push(&topic, "long job".into())
        .await
        .expect("push");
    let (who, attempt) = recv(&mut rx, SOON, "the first delivery").await;
    assert_eq!(attempt, 1);
    recv(&mut done_rx, work + SOON, "the long handler to finish").await;
    // A duplicate would have come during the run; check a while after too.
    assert_quiet(
        &mut rx,
        lease * 2 + QUIET,
        "second delivery of the long job",
    )
    .await;
    println!(
        "{}: consumer {who} ran {work:?} with a {lease:?} lease, no duplicate",
        ctx.case()
    );
    shutdown_all(&[&client, &producer, &consumers[0], &consumers[1]]).await;
}
