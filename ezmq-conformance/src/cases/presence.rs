//! Presence: what runs where, across processes
//! ([`Admin::participants`](ezmq_core::Admin::participants),
//! [`Admin::topics`](ezmq_core::Admin::topics)).

use std::convert::Infallible;
use std::time::Duration;

use ezmq_core::spi::Capability;
use ezmq_core::{ConsumeOptions, Job, MqClient, MqClientExt, Topic};

use crate::support::{assert_unsupported, eventually, shutdown_all};
use crate::Ctx;

/// How long a change may take to show: a heartbeat and a margin.
const SHOWS: Duration = Duration::from_secs(15);

/// A listener running in one client shows in another's
/// `participants()` (topic, concurrency, its process) and its topic in
/// `topics()`, as does a topic that only holds a pushed job where the
/// broker lists topics; once the client shuts down, its participant is
/// gone. On a broker without presence (neither peek nor a store of its
/// own) `participants()` fails with `Unsupported`.
pub async fn presence_shows_live_listeners(ctx: Ctx) {
    let viewer = ctx.client().clone();
    let consumed = ctx.topic("present");
    let pushed = ctx.topic("waiting");
    let worker = ctx.connect().await;
    let listener = worker
        .add_consume_listener_with(
            &consumed,
            ConsumeOptions::new().with_concurrency(3),
            |_job: Job| async { Ok::<(), Infallible>(()) },
        )
        .await
        .expect("add listener");
    viewer.push(&pushed, "x".into()).await.expect("push");
    if !viewer.admin().has_presence() {
        assert_unsupported(
            viewer.admin().participants().await,
            Capability::Peek,
            "participants",
        );
        ctx.skip_lacking(Capability::Peek);
        drop(listener);
        shutdown_all(&[&viewer, &worker]).await;
        return;
    }
    let process = ezmq_core::presence::process_name();
    eventually(SHOWS, "the listener in participants()", || async {
        let live = viewer.admin().participants().await.expect("participants");
        live.iter().any(|p| {
            p.process == process
                && p.listeners
                    .iter()
                    .any(|l| l.topic == consumed && l.concurrency == 3 && l.group.is_none())
        })
    })
    .await;
    let lists_topics = match viewer.runtime().backend().queue_stats() {
        Some(stats) => stats.topics().await.expect("QueueStats::topics").is_some(),
        None => false,
    };
    eventually(SHOWS, "both topics in topics()", || async {
        let topics = viewer.admin().topics().await.expect("topics");
        let has = |name: &str| topics.iter().any(|t: &Topic| t.as_str() == name);
        has(&consumed) && (has(&pushed) || !lists_topics)
    })
    .await;
    drop(listener);
    worker
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    eventually(
        SHOWS,
        "the stopped client gone from participants()",
        || async {
            let live = viewer.admin().participants().await.expect("participants");
            !live
                .iter()
                .any(|p| p.listeners.iter().any(|l| l.topic == consumed))
        },
    )
    .await;
    // Cleanup: the pushed job.
    let taken = viewer
        .admin()
        .take(
            &Topic::new(&pushed).expect("topic"),
            1,
            Duration::from_secs(5),
        )
        .await
        .expect("take");
    let handles: Vec<_> = taken.into_iter().map(|d| d.handle).collect();
    viewer.admin().ack_all(&handles).await.expect("ack");
    crate::support::shutdown(&viewer, Duration::from_secs(5)).await;
}
