//! Unique jobs ([`PushOptions::with_unique_key`]): one job per key, under
//! pushers racing in several processes, and the key given back when the
//! job is settled or cancelled.

use std::sync::Arc;
use std::time::Duration;

use ezmq_core::spi::{Cancelled, Capability};
use ezmq_core::{Client, Error, Job, JobId, MqClient, MqClientExt, PushOptions, Topic, UniqueKey};
use tokio::sync::Barrier;

use crate::support::{assert_unsupported, channel, eventually, recv, shutdown_all, SOON};
use crate::Ctx;

/// Clients pushing together, and tasks per client.
const CLIENTS: usize = 3;
const TASKS: usize = 20;

const HOUR: Duration = Duration::from_secs(3600);

/// 20 tasks on each of 3 clients push one unique key at once: exactly one
/// job is stored, every other push is told it is a duplicate of that job.
/// Once the job is acknowledged the key is free again; a key kept until its
/// ttl is not; a cancelled job gives its key back; in a batch only the
/// first job of a key is stored. A backend without exclusive claims
/// refuses the push.
pub async fn unique_key_admits_one_job(ctx: Ctx) {
    let first = ctx.client();
    let name = ctx.topic("unique");
    if !ctx.has(Capability::ExclusiveClaim) {
        let refused = first.push_with(&name, "x".into(), once("k")).await;
        assert_unsupported(refused, Capability::ExclusiveClaim, "a unique push");
        ctx.skip_lacking(Capability::ExclusiveClaim);
        shutdown_all(&[first]).await;
        return;
    }
    let mut clients = vec![first.clone()];
    for _ in 1..CLIENTS {
        clients.push(ctx.connect().await);
    }
    let winner = race(&clients, &name).await;

    // The one job is delivered, once; then its key is free.
    let (tx, mut rx) = channel::<Job>();
    let listener = first
        .add_consume_listener(&name, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(job);
                Ok::<(), std::convert::Infallible>(())
            }
        })
        .await
        .expect("listener");
    let job = recv(&mut rx, SOON, "the unique job").await;
    assert_eq!(job.id(), &winner);
    eventually(
        SOON,
        "the key to be free once the job is acknowledged",
        || {
            let name = name.clone();
            async move {
                match first.push_with(&name, "again".into(), once("signup")).await {
                    Ok(_) => true,
                    Err(Error::Duplicate { .. }) => false,
                    Err(err) => panic!("push after the ack: {err}"),
                }
            }
        },
    )
    .await;
    let again = recv(&mut rx, SOON, "the second unique job").await;
    assert_eq!(&again.body()[..], b"again");

    // Kept until its ttl: still a duplicate after the job ran.
    let kept = || PushOptions::new().with_unique(UniqueKey::new("debounce", HOUR).until_ttl());
    let debounced = first
        .push_with(&name, "debounced".into(), kept())
        .await
        .expect("first debounced push");
    let ran = recv(&mut rx, SOON, "the debounced job").await;
    assert_eq!(ran.id(), &debounced);
    listener.stop(Duration::from_secs(5)).await;
    let late = first.push_with(&name, "late".into(), kept()).await;
    assert_eq!(
        late.as_ref().err().and_then(Error::duplicate_of),
        Some(&debounced),
        "a key kept until its ttl refuses pushes after the job ran: {late:?}"
    );

    // In a batch, the first job of a key is stored and the others are
    // duplicates of it.
    let batch = first
        .push_batch(
            &name,
            (0..3)
                .map(|n| (format!("batch-{n}").into(), once("batch")))
                .collect(),
        )
        .await
        .expect("batch accepted");
    let stored: Vec<&JobId> = batch.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(stored.len(), 1, "one job of the key stored: {batch:?}");
    assert!(
        batch[0].is_ok(),
        "the batch's first job of the key is stored: {batch:?}"
    );
    for refused in batch.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(refused.duplicate_of(), Some(stored[0]), "{refused}");
    }

    if ctx.has(Capability::JobStore) {
        let topic = Topic::new(name.as_str()).expect("topic");
        let reminder = || once("reminder").with_delay(HOUR);
        let id = first
            .push_with(&name, "remind".into(), reminder())
            .await
            .expect("reminder");
        assert!(first
            .push_with(&name, "remind".into(), reminder())
            .await
            .is_err());
        assert_eq!(
            first.admin().cancel_job(&topic, &id).await.expect("cancel"),
            Cancelled::Removed
        );
        first
            .push_with(&name, "remind".into(), reminder())
            .await
            .expect("a cancelled job gives its key back");
    }
    let refs: Vec<&Client> = clients.iter().collect();
    shutdown_all(&refs).await;
}

/// The options of a push unique by `key` for an hour.
fn once(key: &str) -> PushOptions {
    PushOptions::new().with_unique_key(key, HOUR)
}

/// Every task of every client pushes key `signup` at once; exactly one
/// wins, and the others name it. Returns the winner.
async fn race(clients: &[Client], name: &str) -> JobId {
    let start = Arc::new(Barrier::new(clients.len() * TASKS));
    let mut pushes = Vec::new();
    for client in clients {
        for n in 0..TASKS {
            let (client, start, name) = (client.clone(), Arc::clone(&start), name.to_owned());
            pushes.push(tokio::spawn(async move {
                start.wait().await;
                client
                    .push_with(&name, format!("signup-{n}").into(), once("signup"))
                    .await
            }));
        }
    }
    let mut won = Vec::new();
    let mut duplicates = Vec::new();
    for push in pushes {
        match push.await.expect("push task") {
            Ok(id) => won.push(id),
            Err(Error::Duplicate { existing, .. }) => duplicates.push(existing),
            Err(err) => panic!("a racing unique push failed: {err}"),
        }
    }
    assert_eq!(
        won.len(),
        1,
        "exactly one of the racing pushes is stored: {won:?}"
    );
    let winner = won.remove(0);
    assert!(
        duplicates.iter().all(|d| d.as_ref() == Some(&winner)),
        "every duplicate names the stored job {winner}: {duplicates:?}"
    );
    // Nothing else was stored: the queue holds one job (every push above
    // has returned, so it is final).
    if let Ok(waiting) = clients[0].queue_len(name).await {
        assert_eq!(waiting, 1, "one job waits after the race");
    }
    winner
}
