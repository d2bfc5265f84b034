//! Helpers the cases share: waiting for events with bounds, asserting
//! errors, shutting clients down.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use ezmq_core::spi::{Capability, Delivery, Source};
use ezmq_core::{
    Client, ConsumeOptions, Error, FlowLimits, Job, MqClient, MqClientExt, Result, Topic,
};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

/// Bound for events that should happen at once (a delivery of a message
/// already waiting): generous, so a slow CI machine does not fail.
pub const SOON: Duration = Duration::from_secs(30);

/// A quiet period used to check that something does *not* happen (no
/// duplicate, no early delivery). Absence cannot be awaited; this is a
/// check, not a synchronisation.
pub const QUIET: Duration = Duration::from_millis(500);

/// An unbounded channel that handlers report into.
pub fn channel<T>() -> (UnboundedSender<T>, UnboundedReceiver<T>) {
    mpsc::unbounded_channel()
}

/// The next item, waiting up to `bound`; panics naming `what` otherwise.
pub async fn recv<T>(rx: &mut UnboundedReceiver<T>, bound: Duration, what: &str) -> T {
    match tokio::time::timeout(bound, rx.recv()).await {
        Ok(Some(item)) => item,
        Ok(None) => panic!("channel closed while waiting for {what}"),
        Err(_) => panic!("timed out after {bound:?} waiting for {what}"),
    }
}

/// The next `n` items, all within `bound`.
pub async fn recv_n<T>(
    rx: &mut UnboundedReceiver<T>,
    n: usize,
    bound: Duration,
    what: &str,
) -> Vec<T> {
    let deadline = tokio::time::Instant::now() + bound;
    let mut items = Vec::with_capacity(n);
    while items.len() < n {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(item)) => items.push(item),
            Ok(None) => panic!("channel closed after {} of {n} {what}", items.len()),
            Err(_) => panic!(
                "timed out after {bound:?} with {} of {n} {what}",
                items.len()
            ),
        }
    }
    items
}

/// Checks that nothing arrives for `period`.
pub async fn assert_quiet<T: Debug>(rx: &mut UnboundedReceiver<T>, period: Duration, what: &str) {
    if let Ok(Some(item)) = tokio::time::timeout(period, rx.recv()).await {
        panic!("unexpected {what}: {item:?}");
    }
}

/// Everything already in the channel, without waiting.
pub fn drain<T>(rx: &mut UnboundedReceiver<T>) -> Vec<T> {
    let mut items = Vec::new();
    while let Ok(item) = rx.try_recv() {
        items.push(item);
    }
    items
}

/// Asserts `result` is [`Error::Unsupported`] for `capability`.
pub fn assert_unsupported<T: Debug>(result: Result<T>, capability: Capability, what: &str) {
    match result {
        Err(Error::Unsupported {
            capability: got, ..
        }) if got == capability => {}
        other => panic!(
            "{what} on a backend without {capability} must fail with Error::Unsupported \
             at registration, got {other:?}"
        ),
    }
}

/// Polls `check` (every 50 ms) until it returns true, for at most `bound`.
/// For state that can only be read, not awaited (queue lengths).
pub async fn eventually<F, Fut>(bound: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {bound:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Shuts `client` down with `grace`; panics on an error.
pub async fn shutdown(client: &Client, grace: Duration) {
    if let Err(e) = client.shutdown(grace).await {
        panic!(
            "shutting a {} client down failed: {e}",
            client.backend_name()
        );
    }
}

/// Shuts every client down (grace 5 s each, concurrently).
pub async fn shutdown_all(clients: &[&Client]) {
    futures::future::join_all(clients.iter().map(|c| shutdown(c, Duration::from_secs(5)))).await;
}

/// The body as text, for messages and assertions.
pub fn text(body: &[u8]) -> String {
    String::from_utf8_lossy(body).into_owned()
}

/// A handler error.
pub fn failure(message: impl Into<String>) -> std::io::Error {
    std::io::Error::other(message.into())
}

/// One delivery of `topic` taken straight from the backend (no listener),
/// waiting up to [`SOON`]. The caller settles it (or, to play a crashed
/// consumer, never does).
pub async fn receive_one(client: &Client, topic: &str) -> Delivery {
    let source = Source::Topic(Topic::new(topic).expect("a valid topic"));
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let mut got = match client
            .runtime()
            .backend()
            .receive(&source, 1, Duration::from_secs(1))
            .await
        {
            Ok(got) => got,
            Err(e) => panic!("receiving from {topic} through the backend failed: {e}"),
        };
        if let Some(delivery) = got.pop() {
            assert!(
                got.is_empty(),
                "receive(max = 1) returned more than one message"
            );
            return delivery;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing received from {topic} within {SOON:?}"
        );
    }
}

/// The opening of a case about a listener option that needs
/// `capability`: on a backend without it, asserts that a listener with
/// `options` on `topic` is refused with [`Error::Unsupported`], prints the
/// skip line, shuts the first client down and returns false. Otherwise
/// asserts that a listener with `bad` is refused with
/// [`Error::InvalidOption`] naming `option`, and returns true.
pub async fn listener_option_gate(
    ctx: &crate::Ctx,
    topic: &str,
    options: ConsumeOptions,
    capability: Capability,
    bad: ConsumeOptions,
    option: &'static str,
) -> bool {
    let client = ctx.client();
    let idle = |_job: Job| async { Ok::<(), std::convert::Infallible>(()) };
    if !ctx.has(capability) {
        assert_unsupported(
            client.add_consume_listener_with(topic, options, idle).await,
            capability,
            option,
        );
        ctx.skip_lacking(capability);
        shutdown_all(&[client]).await;
        return false;
    }
    let refused = client.add_consume_listener_with(topic, bad, idle).await;
    assert!(
        matches!(&refused, Err(Error::InvalidOption { option: got, .. }) if *got == option),
        "a bad `{option}` is refused at registration, got {refused:?}"
    );
    true
}

/// Waits (up to [`SOON`]) until [`Admin::flow`](ezmq_core::Admin::flow)
/// shows `topic`'s listeners held back, under limits that pass `check`.
pub async fn until_held_back(client: &Client, topic: &str, check: fn(&FlowLimits) -> bool) {
    let topic = Topic::new(topic).expect("a valid topic");
    let admin = client.admin();
    eventually(
        SOON,
        "the listeners to publish their limits, held back",
        || async {
            admin
                .flow(&topic)
                .await
                .is_ok_and(|status| status.held_back && status.limits.as_ref().is_some_and(check))
        },
    )
    .await;
}
