//! Cluster-wide topic pauses ([`Admin::pause`](ezmq_core::Admin::pause)):
//! every listener of the topic, in every process, stops taking jobs, and
//! nothing is lost or run twice because of it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ezmq_core::spi::Capability;
use ezmq_core::{Client, ConsumeOptions, Job, MqClient, MqClientExt, PushOptions, Topic};
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

use crate::support::{
    assert_quiet, assert_unsupported, channel, drain, eventually, recv_n, shutdown_all, SOON,
};
use crate::Ctx;

/// Jobs in the backlog.
const BACKLOG: usize = 1000;
/// Jobs pushed while the topic is paused.
const WHILE_PAUSED: usize = 20;
/// How long after `pause` returned a listener may still start a job.
const STOP_WITHIN: Duration = Duration::from_secs(1);

/// A backlog drains through listeners on two clients at concurrency 16;
/// `pause` half-way stops both within a second (running jobs finish), a
/// listener started while the topic is paused stays idle, pushes are still
/// accepted, and after `resume` every job has run exactly once.
pub async fn pause_stops_every_listener_of_a_topic(ctx: Ctx) {
    let a = ctx.client();
    let name = ctx.topic("paused");
    let topic = Topic::new(name.as_str()).expect("topic");
    let admin = a.admin();
    if !ctx.has(Capability::ExclusiveClaim) {
        assert_unsupported(
            admin.pause(&topic).await,
            Capability::ExclusiveClaim,
            "pause",
        );
        ctx.skip_lacking(Capability::ExclusiveClaim);
        shutdown_all(&[a]).await;
        return;
    }
    assert!(!admin.is_paused(&topic).await.expect("is_paused"));
    let b = ctx.connect().await;
    let c = ctx.connect().await;
    let jobs = (0..BACKLOG)
        .map(|n| (format!("job-{n}").into(), PushOptions::new()))
        .collect();
    for pushed in a.push_batch(&name, jobs).await.expect("backlog") {
        pushed.expect("backlog job");
    }

    let (tx, mut rx) = channel::<(String, Instant)>();
    let listeners = [
        listen(a, &name, tx.clone()).await,
        listen(&b, &name, tx.clone()).await,
    ];
    let mut started = recv_n(&mut rx, 50, SOON, "the first jobs of the backlog").await;
    assert!(
        admin.pause(&topic).await.expect("pause"),
        "not paused before"
    );
    let paused_at = Instant::now();
    assert!(
        !admin.pause(&topic).await.expect("pause again"),
        "already paused"
    );
    assert!(admin.is_paused(&topic).await.expect("is_paused"));
    eventually(SOON, "both listeners to see the pause", || async {
        listeners.iter().all(|l| l.is_topic_paused())
    })
    .await;
    let late_listener = listen(&c, &name, tx.clone()).await;
    for n in 0..WHILE_PAUSED {
        a.push(&name, format!("while-{n}").into())
            .await
            .expect("a push while paused is accepted");
    }
    // Wait out the second, then nothing may start for a while.
    tokio::time::sleep_until(paused_at + STOP_WITHIN).await;
    started.extend(drain(&mut rx));
    if let Some((late, at)) = started.iter().find(|(_, at)| *at > paused_at + STOP_WITHIN) {
        panic!("{late} started {:?} after the pause", *at - paused_at);
    }
    assert_quiet(
        &mut rx,
        Duration::from_secs(2),
        "a job started while the topic is paused",
    )
    .await;
    assert!(
        started.len() < BACKLOG,
        "the pause came before the backlog drained"
    );

    assert!(admin.resume(&topic).await.expect("resume"), "was paused");
    assert!(
        !admin.resume(&topic).await.expect("resume again"),
        "no longer paused"
    );
    assert!(!admin.is_paused(&topic).await.expect("is_paused"));
    let left = BACKLOG + WHILE_PAUSED - started.len();
    started.extend(recv_n(&mut rx, left, SOON, "every job after resume").await);
    assert_quiet(&mut rx, Duration::from_millis(500), "a job run twice").await;
    let mut runs: HashMap<String, usize> = HashMap::new();
    for (body, _) in &started {
        *runs.entry(body.clone()).or_default() += 1;
    }
    assert_eq!(runs.len(), BACKLOG + WHILE_PAUSED, "every job ran");
    assert!(runs.values().all(|n| *n == 1), "no job ran twice");
    drop(late_listener);
    shutdown_all(&[a, &b, &c]).await;
}

/// A listener on `name` at concurrency 16 whose handler reports each job's
/// body and start, then takes 50 ms (so the backlog outlasts the pause taking effect).
async fn listen(
    client: &Client,
    name: &str,
    tx: UnboundedSender<(String, Instant)>,
) -> ezmq_core::ListenerHandle {
    let tx = Arc::new(tx);
    client
        .add_consume_listener_with(
            name,
            ConsumeOptions::new().with_concurrency(16),
            move |job: Job| {
                let tx = Arc::clone(&tx);
                async move {
                    let _ = tx.send((
                        String::from_utf8_lossy(job.body()).into_owned(),
                        Instant::now(),
                    ));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok::<(), std::convert::Infallible>(())
                }
            },
        )
        .await
        .expect("listener")
}
