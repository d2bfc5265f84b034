//! Pushes that carry a message id: deduplicated where the backend reports
//! [`Capability::IdempotentPush`], stored as often as pushed elsewhere.

use std::time::Duration;

use ezmq_core::spi::Capability;
use ezmq_core::{MqClient, PushOptions};

use crate::support::{shutdown, text, SOON};
use crate::Ctx;

/// [`Capability::IdempotentPush`]: a second push with the same message id
/// stores nothing (one delivery of it, before a marker pushed after both);
/// a push with another id is stored. A backend without the capability
/// stores both copies, and the case says it lacks the capability.
pub async fn idempotent_push_by_message_id(ctx: Ctx) {
    let client = ctx.client();
    let topic = ctx.topic("idem");
    let with_id = |id: &str| PushOptions::new().with_message_id(id);
    let first = client
        .push_with(&topic, "order-1".into(), with_id("order-1"))
        .await
        .expect("first push with a message id");
    let again = client
        .push_with(&topic, "order-1".into(), with_id("order-1"))
        .await
        .expect("the same push again (after an unknown outcome, say)");
    client
        .push_with(&topic, "order-2".into(), with_id("order-2"))
        .await
        .expect("a push with another id");
    client
        .push(&topic, "marker".into())
        .await
        .expect("marker push");

    // Every job pushed before the marker is delivered before it on a
    // backend that deduplicates (a FIFO queue); elsewhere the case waits
    // for the second copy too, as a cluster may deliver out of order.
    let lacking = !ctx.has(Capability::IdempotentPush);
    let mut seen: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + SOON;
    let done = |seen: &[String]| {
        let count = |b: &str| seen.iter().filter(|s| *s == b).count();
        count("marker") == 1 && count("order-2") == 1 && (!lacking || count("order-1") == 2)
    };
    while !done(&seen) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the marker did not arrive within {SOON:?}; seen {seen:?}"
        );
        let delivery = crate::support::receive_one(client, &topic).await;
        seen.push(text(delivery.job.body()));
        delivery.handle.ack().await.expect("ack");
    }
    let copies = seen.iter().filter(|b| *b == "order-1").count();
    assert_eq!(
        seen.iter().filter(|b| *b == "order-2").count(),
        1,
        "another id is stored once: {seen:?}"
    );
    if ctx.has(Capability::IdempotentPush) {
        assert_eq!(
            copies, 1,
            "the second push with the same id stored a copy: {seen:?}"
        );
        assert_eq!(
            first, again,
            "the duplicate push returns the first push's id"
        );
    } else {
        assert_eq!(
            copies, 2,
            "a backend without idempotent push stores both copies: {seen:?}"
        );
        ctx.skip_lacking(Capability::IdempotentPush);
    }
    shutdown(client, Duration::from_secs(5)).await;
}
