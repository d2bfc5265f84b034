//! Broadcast to consumer groups (ezmq-broadcast) on the backend's fan-out.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use ezmq_broadcast::BroadcastExt;
use ezmq_core::spi::Capability;
use ezmq_core::{handler_fn, Job};

use crate::support::{assert_unsupported, channel, shutdown, shutdown_all, text, QUIET, SOON};
use crate::Ctx;

/// Broadcasts counted.
const N: usize = 20;

/// [`Capability::FanOut`]: two groups of two members (four clients) on
/// one topic; once both groups are known to the publisher (probe
/// broadcasts until each group got one), 20 broadcasts are each handled
/// exactly once by each group.
pub async fn broadcast_groups(ctx: Ctx) {
    let topic = ctx.topic("news");
    if !ctx.has(Capability::FanOut) {
        let result = ctx
            .client()
            .add_broadcast_listener(
                &topic,
                "g1",
                Arc::new(handler_fn(|_job: Job| async { Ok::<(), Infallible>(()) })),
            )
            .await;
        assert_unsupported(result, Capability::FanOut, "add_broadcast_listener");
        ctx.skip_lacking(Capability::FanOut);
        shutdown(ctx.client(), Duration::from_secs(5)).await;
        return;
    }

    let publisher = ctx.client().clone();
    let (tx, mut rx) = channel();
    let mut members = Vec::new();
    for group in ["g1", "g2"] {
        for member in 0..2 {
            let client = ctx.connect().await;
            let tx = tx.clone();
            client
                .add_broadcast_consume_listener(&topic, group, move |job: Job| {
                    let tx = tx.clone();
                    async move {
                        let _ = tx.send((group, member, text(job.body())));
                        Ok::<(), Infallible>(())
                    }
                })
                .await
                .expect("add_broadcast_listener");
            members.push(client);
        }
    }

    // Groups reach a publisher in another process after a discovery
    // delay: probe until each group received a probe.
    let deadline = tokio::time::Instant::now() + SOON;
    let mut probed = BTreeMap::new();
    let mut probe = 0;
    while probed.len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "groups reached by probes within {SOON:?}: {probed:?}"
        );
        publisher
            .push_broadcast(&topic, format!("probe-{probe}").into())
            .await
            .expect("push_broadcast");
        probe += 1;
        if let Ok(Some((group, _, _))) =
            tokio::time::timeout(Duration::from_millis(300), rx.recv()).await
        {
            probed.insert(group, ());
        }
    }

    for i in 0..N {
        publisher
            .push_broadcast(&topic, format!("news-{i}").into())
            .await
            .expect("push_broadcast");
    }
    let mut handled: BTreeMap<(&str, String), Vec<usize>> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + SOON;
    while handled.len() < 2 * N {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some((group, member, body))) => {
                if body.starts_with("news-") {
                    handled.entry((group, body)).or_default().push(member);
                }
            }
            _ => panic!(
                "timed out with {} of {} (group, broadcast) pairs handled",
                handled.len(),
                2 * N
            ),
        }
    }
    // Late duplicates (probes may still trickle in; they do not count).
    let mut extra = Vec::new();
    while let Ok(Some((group, member, body))) = tokio::time::timeout(QUIET, rx.recv()).await {
        if body.starts_with("news-") {
            extra.push((group, member, body));
        }
    }
    assert!(
        extra.is_empty(),
        "broadcasts handled twice by a group: {extra:?}"
    );
    for ((group, body), by) in &handled {
        assert_eq!(by.len(), 1, "{group} handled {body} {} times", by.len());
    }
    let all: Vec<_> = std::iter::once(&publisher).chain(members.iter()).collect();
    shutdown_all(&all).await;
}
