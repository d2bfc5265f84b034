//! The job layer: one id per job through delay, retry and dead letter; a
//! job's own retry policy; batch pushes; pausing a listener.

use std::time::Duration;

use ezmq_core::spi::Capability;
use ezmq_core::{ConsumeOptions, DeadLetterRecord, Error, Job, MqClient, MqClientExt, PushOptions};

use crate::support::{assert_quiet, channel, failure, recv, recv_n, shutdown, shutdown_all, SOON};
use crate::Ctx;

/// One job keeps one id: pushed with a delay and its own attempt limit (2,
/// where the listener allows 5), it fails twice — both attempts carry the
/// id the push returned and the job's metadata — and is dead-lettered
/// after the second: the dead letter has the same id, as job and in its
/// record.
pub async fn one_job_id_through_delay_retry_dead_letter(ctx: Ctx) {
    let client = ctx.client();
    let topic = ctx.topic("one-id");
    let dead = format!("{topic}.dead-letter");
    let delayed = ctx.has(Capability::DelayedDelivery);
    let mut options = PushOptions::new().with_max_attempts(2);
    if delayed {
        options = options.with_delay(Duration::from_secs(1));
    }
    let id = client
        .push_with(&topic, "payload".into(), options)
        .await
        .expect("push");

    let (tx, mut attempts) = channel::<Job>();
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new()
                .with_max_attempts(5)
                .with_backoff(Duration::from_millis(50), Duration::from_millis(100)),
            move |job: Job| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(job);
                    Err::<(), _>(failure("always fails"))
                }
            },
        )
        .await
        .expect("listener");
    let (dead_tx, mut dead_rx) = channel::<Job>();
    client
        .add_consume_listener(&dead, move |job: Job| {
            let dead_tx = dead_tx.clone();
            async move {
                let _ = dead_tx.send(job);
                Ok::<(), std::convert::Infallible>(())
            }
        })
        .await
        .expect("dead-letter listener");

    let seen = recv_n(&mut attempts, 2, SOON, "both attempts").await;
    for (n, job) in seen.iter().enumerate() {
        let meta = job.meta();
        assert_eq!(job.id(), &id, "attempt {} has the pushed id", n + 1);
        assert_eq!(meta.attempt, u32::try_from(n + 1).unwrap_or(0));
        assert_eq!(meta.max_attempts, Some(2), "the job's own limit travels");
        assert!(meta.enqueued_at.is_some(), "enqueued-at is known");
        if delayed {
            assert!(
                meta.scheduled_at.is_some(),
                "a delayed job's run-at travels"
            );
        }
    }
    let dead_job = recv(&mut dead_rx, SOON, "the dead letter").await;
    assert_eq!(dead_job.id(), &id, "the dead letter keeps the job's id");
    let record = DeadLetterRecord::from_job(&dead_job).expect("a dead-letter record");
    assert_eq!(record.job_id, id.as_str());
    assert_eq!(record.attempts, 2, "the job's own limit dead-lettered it");
    assert_quiet(&mut attempts, Duration::from_millis(500), "a third attempt").await;
    if !delayed {
        ctx.skip_lacking(Capability::DelayedDelivery);
    }
    shutdown(client, Duration::from_secs(5)).await;
}

/// A batch push: a batch with one invalid job is refused whole, nothing
/// sent; a valid batch of 25 is stored with 25 distinct ids, each
/// delivered once with its id, and its jobs' options (a header) kept.
pub async fn batch_push(ctx: Ctx) {
    let client = ctx.client();
    let topic = ctx.topic("batch");
    let refused = client
        .push_batch(
            &topic,
            vec![
                ("ok".into(), PushOptions::new()),
                ("bad".into(), PushOptions::new().with_max_attempts(0)),
            ],
        )
        .await;
    assert!(
        matches!(refused, Err(Error::BatchRejected { index: 1, .. })),
        "an invalid job refuses the batch: {refused:?}"
    );
    let jobs = (0..25)
        .map(|n| {
            (
                format!("job-{n}").into(),
                PushOptions::new().with_header("n", n.to_string()),
            )
        })
        .collect();
    let ids: Vec<_> = client
        .push_batch(&topic, jobs)
        .await
        .expect("batch accepted")
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("every job stored");
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 25, "25 distinct ids");

    let (tx, mut rx) = channel::<Job>();
    client
        .add_consume_listener(&topic, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(job);
                Ok::<(), std::convert::Infallible>(())
            }
        })
        .await
        .expect("listener");
    let got = recv_n(&mut rx, 25, SOON, "the batch").await;
    for job in &got {
        let body = String::from_utf8_lossy(job.body()).into_owned();
        let n: usize = body
            .strip_prefix("job-")
            .and_then(|n| n.parse().ok())
            .expect("a batch body");
        assert_eq!(job.id(), &ids[n], "{body} has the id its push returned");
        assert_eq!(job.headers().get("n"), Some(n.to_string().as_str()));
    }
    assert_quiet(
        &mut rx,
        Duration::from_millis(500),
        "a job of the invalid batch",
    )
    .await;
    shutdown(client, Duration::from_secs(5)).await;
}

/// Pausing a listener: once `pause` returned it starts no job (those
/// pushed while it is paused go to another client's listener, prefetched
/// ones included), and after `resume` it takes jobs again.
pub async fn pause_and_resume_listener(ctx: Ctx) {
    let a = ctx.client();
    let b = ctx.connect().await;
    let topic = ctx.topic("pause");
    let (a_tx, mut a_rx) = channel::<String>();
    let paused = a
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new().with_concurrency(4),
            move |job: Job| {
                let a_tx = a_tx.clone();
                async move {
                    let _ = a_tx.send(String::from_utf8_lossy(job.body()).into_owned());
                    Ok::<(), std::convert::Infallible>(())
                }
            },
        )
        .await
        .expect("listener A");
    a.push(&topic, "before".into()).await.expect("push");
    assert_eq!(recv(&mut a_rx, SOON, "A's first job").await, "before");

    paused.pause();
    assert!(paused.is_paused());
    for n in 0..5 {
        a.push(&topic, format!("while-{n}").into())
            .await
            .expect("push while paused");
    }
    let (b_tx, mut b_rx) = channel::<String>();
    let other = b
        .add_consume_listener(&topic, move |job: Job| {
            let b_tx = b_tx.clone();
            async move {
                let _ = b_tx.send(String::from_utf8_lossy(job.body()).into_owned());
                Ok::<(), std::convert::Infallible>(())
            }
        })
        .await
        .expect("listener B");
    let mut got = recv_n(&mut b_rx, 5, SOON, "B to take the jobs A may not").await;
    got.sort();
    assert_eq!(
        got,
        (0..5).map(|n| format!("while-{n}")).collect::<Vec<_>>()
    );
    assert_quiet(
        &mut a_rx,
        Duration::from_millis(500),
        "a job run by paused A",
    )
    .await;

    other.stop(Duration::from_secs(5)).await;
    paused.resume();
    assert!(!paused.is_paused());
    a.push(&topic, "after".into())
        .await
        .expect("push after resume");
    assert_eq!(recv(&mut a_rx, SOON, "A's job after resume").await, "after");
    shutdown_all(&[a, &b]).await;
}

/// [`Capability::JobStore`]: scheduled jobs are found by id, listed,
/// counted, cancelled (then gone) and promoted (then delivered at once); a
/// running job is not cancelled. A backend without it refuses with
/// `Error::Unsupported`.
pub async fn job_store_finds_cancels_and_promotes(ctx: Ctx) {
    use ezmq_core::spi::{Cancelled, JobState};
    use ezmq_core::Topic;

    let client = ctx.client();
    let name = ctx.topic("jobs");
    let topic = Topic::new(name.as_str()).expect("topic");
    let admin = client.admin();
    if !ctx.has(Capability::JobStore) {
        let refused = admin.count_jobs(&topic, JobState::Scheduled).await;
        crate::support::assert_unsupported(refused, Capability::JobStore, "count_jobs");
        ctx.skip_lacking(Capability::JobStore);
        shutdown(client, Duration::from_secs(5)).await;
        return;
    }
    let later = Duration::from_secs(600);
    let a = client
        .push_delay(&name, "a".into(), later)
        .await
        .expect("push a");
    let b = client
        .push_delay(&name, "b".into(), later + Duration::from_secs(60))
        .await
        .expect("push b");
    let found = admin
        .job(&topic, &a)
        .await
        .expect("job")
        .expect("a is found");
    assert_eq!(found.state, JobState::Scheduled);
    assert_eq!(found.job.id(), &a);
    assert_eq!(&found.job.body()[..], b"a");
    let due = found.due_at.expect("a scheduled job has a due time");
    let ahead = due
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    assert!(
        ahead > Duration::from_secs(500),
        "due in about 600 s: {ahead:?}"
    );
    assert_eq!(
        admin
            .count_jobs(&topic, JobState::Scheduled)
            .await
            .expect("count"),
        2
    );
    let mut listed: Vec<_> = admin
        .jobs(&topic, JobState::Scheduled, None, 10)
        .await
        .expect("list")
        .into_iter()
        .map(|info| info.job.id().clone())
        .collect();
    listed.sort();
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(listed, expected, "both scheduled jobs are listed");
    assert_eq!(admin.scheduled_len(&topic).await.expect("scheduled_len"), 2);
    let soonest = admin.scheduled(&topic, 1).await.expect("scheduled");
    assert_eq!(soonest.len(), 1, "at most n");
    assert_eq!(soonest[0].job.id(), &a, "the soonest due first");

    assert_eq!(
        admin.cancel_job(&topic, &a).await.expect("cancel"),
        Cancelled::Removed
    );
    assert!(
        admin.job(&topic, &a).await.expect("job").is_none(),
        "a cancelled job is gone"
    );
    assert_eq!(
        admin.cancel_job(&topic, &a).await.expect("cancel again"),
        Cancelled::NotFound
    );
    assert!(
        admin.promote_job(&topic, &b).await.expect("promote"),
        "b was scheduled"
    );

    let (tx, mut rx) = channel::<Job>();
    let (release_tx, release_rx) = tokio::sync::watch::channel(false);
    client
        .add_consume_listener(&name, move |job: Job| {
            let tx = tx.clone();
            let mut release = release_rx.clone();
            async move {
                let hold = job.body().as_ref() == b"hold";
                let _ = tx.send(job);
                if hold {
                    let _ = release.wait_for(|go| *go).await;
                }
                Ok::<(), std::convert::Infallible>(())
            }
        })
        .await
        .expect("listener");
    let promoted = recv(&mut rx, SOON, "the promoted job, long before its delay").await;
    assert_eq!(promoted.id(), &b);
    let held = client.push(&name, "hold".into()).await.expect("push hold");
    let running = recv(&mut rx, SOON, "the held job to start").await;
    assert_eq!(running.id(), &held);
    assert_eq!(
        admin
            .cancel_job(&topic, &held)
            .await
            .expect("cancel running"),
        Cancelled::Running,
        "a running job is left to its handler"
    );
    let _ = release_tx.send(true);
    assert_quiet(&mut rx, Duration::from_millis(500), "the cancelled job").await;
    shutdown(client, Duration::from_secs(5)).await;
}
