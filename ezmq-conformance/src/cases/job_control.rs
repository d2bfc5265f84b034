//! Job control through the job store: every state a job can be found in,
//! and cancelling at the instant jobs come due, where a cancel and a
//! delivery must never both win.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use ezmq_core::spi::{Cancelled, Capability, JobState};
use ezmq_core::{ConsumeOptions, Job, JobId, MqClient, MqClientExt, PushOptions, Topic};

use crate::support::{
    assert_quiet, assert_unsupported, channel, failure, recv, recv_n, shutdown, SOON,
};
use crate::Ctx;

/// A ready job is found, listed, counted and cancelled; a failed job
/// waiting for its backoff is found retrying, with its due time, and
/// promoted runs its next attempt at once.
pub async fn job_store_sees_ready_and_retrying_jobs(ctx: Ctx) {
    let client = ctx.client();
    let name = ctx.topic("states");
    let topic = Topic::new(name.as_str()).expect("topic");
    let admin = client.admin();
    if !ctx.has(Capability::JobStore) {
        let refused = admin.jobs(&topic, JobState::Ready, None, 10).await;
        assert_unsupported(refused, Capability::JobStore, "jobs");
        ctx.skip_lacking(Capability::JobStore);
        shutdown(client, Duration::from_secs(5)).await;
        return;
    }
    let ready = client.push(&name, "ready".into()).await.expect("push");
    let found = admin
        .job(&topic, &ready)
        .await
        .expect("job")
        .expect("found");
    assert_eq!(found.state, JobState::Ready);
    assert_eq!(&found.job.body()[..], b"ready");
    let listed = admin
        .jobs(&topic, JobState::Ready, None, 10)
        .await
        .expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].job.id(), &ready);
    assert_eq!(
        admin
            .count_jobs(&topic, JobState::Ready)
            .await
            .expect("count"),
        1
    );
    assert_eq!(
        admin.cancel_job(&topic, &ready).await.expect("cancel"),
        Cancelled::Removed
    );
    assert_eq!(
        admin
            .count_jobs(&topic, JobState::Ready)
            .await
            .expect("count"),
        0
    );
    assert!(admin.job(&topic, &ready).await.expect("job").is_none());

    // A job that fails once waits 10 minutes for its retry, unless promoted.
    let (tx, mut attempts) = channel::<Job>();
    client
        .add_consume_listener_with(
            &name,
            ConsumeOptions::new()
                .with_max_attempts(3)
                .with_backoff(Duration::from_secs(600), Duration::from_secs(600)),
            move |job: Job| {
                let tx = tx.clone();
                async move {
                    let first = job.attempt() == 1;
                    let _ = tx.send(job);
                    if first {
                        Err(failure("first attempt fails"))
                    } else {
                        Ok(())
                    }
                }
            },
        )
        .await
        .expect("listener");
    let failing = client.push(&name, "flaky".into()).await.expect("push");
    let first = recv(&mut attempts, SOON, "the first attempt").await;
    assert_eq!(first.id(), &failing);
    // Read, not awaited: the listener settles the failure after the
    // handler returns.
    let deadline = tokio::time::Instant::now() + SOON;
    let info = loop {
        match admin.job(&topic, &failing).await.expect("job") {
            Some(info) if info.state == JobState::Retrying => break info,
            _ if tokio::time::Instant::now() >= deadline => {
                panic!("the failed job was not found retrying within {SOON:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    assert_eq!(info.job.attempt(), 2, "the next attempt is the second");
    let ahead = info
        .due_at
        .expect("a retrying job has a due time")
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    assert!(
        ahead > Duration::from_secs(500),
        "due in about 600 s: {ahead:?}"
    );
    assert_eq!(
        admin
            .count_jobs(&topic, JobState::Retrying)
            .await
            .expect("count"),
        1
    );
    assert!(admin.promote_job(&topic, &failing).await.expect("promote"));
    let second = recv(&mut attempts, SOON, "the promoted retry").await;
    assert_eq!((second.id(), second.attempt()), (&failing, 2));
    shutdown(client, Duration::from_secs(5)).await;
}

/// 1,000 jobs come due together while a listener (concurrency 16) takes
/// them and half of them are cancelled around that instant (from 200 ms
/// before it, spread over 400 ms): a job whose cancel said `Removed` is
/// never delivered; every other one is delivered once.
pub async fn cancel_never_races_delivery(ctx: Ctx) {
    const JOBS: usize = 1000;
    let client = ctx.client();
    let name = ctx.topic("cancel-race");
    let topic = Topic::new(name.as_str()).expect("topic");
    if !ctx.has(Capability::JobStore) || !ctx.has(Capability::DelayedDelivery) {
        ctx.skip_lacking(if ctx.has(Capability::JobStore) {
            Capability::DelayedDelivery
        } else {
            Capability::JobStore
        });
        shutdown(client, Duration::from_secs(5)).await;
        return;
    }
    let delay = Duration::from_secs(2);
    let batch = (0..JOBS)
        .map(|i| (i.to_string().into(), PushOptions::new().with_delay(delay)))
        .collect();
    let pushed_at = tokio::time::Instant::now();
    let ids: Vec<JobId> = client
        .push_batch(&name, batch)
        .await
        .expect("batch")
        .into_iter()
        .map(|id| id.expect("pushed"))
        .collect();
    let (tx, mut delivered) = channel::<JobId>();
    client
        .add_consume_listener_with(
            &name,
            ConsumeOptions::new().with_concurrency(16),
            move |job: Job| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(job.id().clone());
                    Ok::<(), std::convert::Infallible>(())
                }
            },
        )
        .await
        .expect("listener");
    // Around the due time: the cancels start 200 ms before it and are
    // spread over 400 ms, so the first ones find their jobs scheduled and
    // the later ones meet the deliveries (a loaded machine, or a broker
    // that rounds delays, cannot make them all miss or all win).
    let first_cancel = pushed_at + delay - Duration::from_millis(200);
    let admin = client.admin();
    let outcomes = futures::future::join_all(ids.iter().step_by(2).enumerate().map(|(i, id)| {
        let at = first_cancel + Duration::from_micros(800 * i as u64);
        let admin = &admin;
        let topic = &topic;
        async move {
            tokio::time::sleep_until(at).await;
            (id.clone(), admin.cancel_job(topic, id).await)
        }
    }))
    .await;
    let mut removed = Vec::new();
    for (id, outcome) in outcomes {
        match outcome.expect("cancel") {
            Cancelled::Removed => removed.push(id),
            Cancelled::Running | Cancelled::NotFound => {}
            other => panic!("unexpected cancel outcome {other:?}"),
        }
    }
    assert!(
        !removed.is_empty(),
        "cancels from 200 ms before the due time removed nothing"
    );
    let expected = JOBS - removed.len();
    let got = recv_n(&mut delivered, expected, SOON * 2, "deliveries").await;
    assert_quiet(
        &mut delivered,
        Duration::from_secs(1),
        "delivery beyond the expected",
    )
    .await;
    let mut times: HashMap<JobId, usize> = HashMap::new();
    for id in got {
        *times.entry(id).or_default() += 1;
    }
    for id in &removed {
        assert!(!times.contains_key(id), "cancelled job {id} was delivered");
    }
    assert_eq!(
        times.len(),
        expected,
        "every job not cancelled is delivered"
    );
    assert!(times.values().all(|n| *n == 1), "each delivered once");
    shutdown(client, Duration::from_secs(5)).await;
}

/// A job scheduled in 10 minutes, rescheduled to 1 s from now, is
/// delivered then: not before the new time, long before the old one; an
/// unknown job is not rescheduled.
pub async fn reschedule_moves_a_due_time(ctx: Ctx) {
    let client = ctx.client();
    let name = ctx.topic("reschedule");
    let topic = Topic::new(name.as_str()).expect("topic");
    let admin = client.admin();
    if !ctx.has(Capability::JobStore) {
        let refused = admin
            .reschedule_job(&topic, &JobId::new("x"), SystemTime::now())
            .await;
        assert_unsupported(refused, Capability::JobStore, "reschedule_job");
        ctx.skip_lacking(Capability::JobStore);
        shutdown(client, Duration::from_secs(5)).await;
        return;
    }
    let id = client
        .push_delay(&name, "moved".into(), Duration::from_secs(600))
        .await
        .expect("push");
    let at = SystemTime::now() + Duration::from_secs(1);
    assert!(admin
        .reschedule_job(&topic, &id, at)
        .await
        .expect("reschedule"));
    let due = admin
        .job(&topic, &id)
        .await
        .expect("job")
        .expect("found")
        .due_at
        .expect("due time");
    let off = due
        .duration_since(at)
        .unwrap_or_else(|early| early.duration());
    assert!(
        off < Duration::from_millis(500),
        "due at the new time: {off:?} off"
    );
    assert!(!admin
        .reschedule_job(&topic, &JobId::new("no-such-job"), at)
        .await
        .expect("reschedule unknown"));

    let (tx, mut rx) = channel::<SystemTime>();
    client
        .add_consume_listener(&name, move |_job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(SystemTime::now());
                Ok::<(), std::convert::Infallible>(())
            }
        })
        .await
        .expect("listener");
    let delivered = recv(&mut rx, SOON, "the rescheduled job").await;
    assert!(
        delivered >= at,
        "delivered {:?} before its new time",
        at.duration_since(delivered).unwrap_or_default()
    );
    shutdown(client, Duration::from_secs(5)).await;
}
