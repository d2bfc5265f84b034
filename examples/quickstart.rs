//! The five-minute tour: every ezmq feature once, on an embedded
//! Disque-compatible server (or the broker in `EZMQ_URL`).
//!
//! ```sh
//! cargo run --example quickstart
//! ```
//!
//! It exits by itself in about ten seconds.

mod support;

use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use ezmq::prelude::*;
use ezmq::spi::Capability;
use ezmq::{Job, PushOptions, Topic};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tracing::info;

#[derive(Debug, Serialize, Deserialize)]
struct Signup {
    user: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    support::init_logging();
    let (url, server) = support::broker().await?;
    let client = ezmq::connect_url(&url).await?;
    let deadline = Duration::from_secs(10);

    // 1. A consume listener receiving pushed messages (typed JSON).
    let (tx, mut rx) = mpsc::channel(16);
    client
        .add_json_listener("quickstart.signups", move |signup: Signup| {
            let tx = tx.clone();
            async move {
                info!(user = %signup.user, "[consume] welcome email sent");
                let _ = tx.send(signup.user).await;
                Ok::<(), anyhow::Error>(())
            }
        })
        .await?;
    for user in ["ada", "grace", "linus"] {
        client
            .push_json("quickstart.signups", &Signup { user: user.into() })
            .await?;
    }
    for _ in 0..3 {
        recv(&mut rx, deadline, "consume").await?;
    }

    // 2. A delayed message arrives after its delay, not before.
    let (tx, mut rx) = mpsc::channel(1);
    client
        .add_consume_listener("quickstart.reminders", move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(job.into_body()).await;
                Ok::<(), anyhow::Error>(())
            }
        })
        .await?;
    let pushed = Instant::now();
    client
        .push_delay(
            "quickstart.reminders",
            "renew".into(),
            Duration::from_secs(2),
        )
        .await?;
    info!("[delay] pushed a reminder due in 2s");
    let body = recv(&mut rx, deadline, "delay").await?;
    info!(
        body = %String::from_utf8_lossy(&body),
        after = ?pushed.elapsed(),
        "[delay] reminder arrived"
    );

    // 3. Job control: a reminder cancelled before it is due (the user
    //    already did it), and a push deduplicated by its unique key.
    if client.capabilities().has(Capability::JobStore) {
        let reminders = Topic::new("quickstart.reminders")?;
        let reminder = client
            .push_delay(
                "quickstart.reminders",
                "finish signup".into(),
                Duration::from_secs(3600),
            )
            .await?;
        let admin = client.admin();
        let scheduled = admin.scheduled_len(&reminders).await?;
        info!(scheduled, "[jobs] a reminder is scheduled in 1h");
        let cancelled = admin.cancel_job(&reminders, &reminder).await?;
        let scheduled = admin.scheduled_len(&reminders).await?;
        info!(
            ?cancelled,
            scheduled, "[jobs] the user finished signing up: reminder cancelled"
        );
    } else {
        let backend = client.backend_name();
        info!(
            backend,
            "[jobs] this broker cannot cancel a scheduled job (see its README)"
        );
    }
    // The key names this run, so a second run within the ttl is not a
    // duplicate of this one.
    let key = format!("welcome:ada:{}", std::process::id());
    let welcome = || PushOptions::new().with_unique_key(key.as_str(), Duration::from_secs(600));
    let first = client
        .push_with("quickstart.welcome", "welcome, ada".into(), welcome())
        .await?;
    match client
        .push_with("quickstart.welcome", "welcome, ada".into(), welcome())
        .await
    {
        Err(ezmq::Error::Duplicate { existing, .. }) => {
            info!(%first, duplicate_of = ?existing, "[jobs] the second welcome was a duplicate: nothing stored");
        }
        other => anyhow::bail!("a second unique push must be a duplicate, got {other:?}"),
    }
    let (tx, mut rx) = mpsc::channel(1);
    client
        .add_consume_listener("quickstart.welcome", move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(job.id().clone()).await;
                Ok::<(), anyhow::Error>(())
            }
        })
        .await?;
    let sent = recv(&mut rx, deadline, "unique").await?;
    info!(%sent, "[jobs] the one welcome was sent (its key is free again once acknowledged)");

    // 4. A crontab firing on its schedule (every second; on many processes
    //    each tick would still run once).
    let (tx, mut rx) = mpsc::channel(4);
    client
        .add_crontab(
            "quickstart-report",
            "* * * * * *",
            move |tick: DateTime<Utc>| {
                let tx = tx.clone();
                async move {
                    info!(%tick, "[cron] report tick");
                    let _ = tx.send(tick).await;
                    Ok::<(), anyhow::Error>(())
                }
            },
        )
        .await?;
    for _ in 0..2 {
        recv(&mut rx, deadline, "cron").await?;
    }
    client.remove_crontab("quickstart-report").await;

    // 5. A broadcast reaching two groups (one member each).
    let (tx, mut rx) = mpsc::channel(4);
    for group in ["billing", "analytics"] {
        let tx = tx.clone();
        client
            .add_broadcast_consume_listener("quickstart.orders", group, move |job: Job| {
                let tx = tx.clone();
                async move {
                    info!(group, body = %String::from_utf8_lossy(job.body()), "[broadcast] received");
                    let _ = tx.send(group).await;
                    Ok::<(), anyhow::Error>(())
                }
            })
            .await?;
    }
    let receipt = client
        .push_broadcast("quickstart.orders", "order #1001".into())
        .await?;
    info!(groups = ?receipt.group_count(), "[broadcast] pushed to every group");
    let mut groups = vec![
        recv(&mut rx, deadline, "broadcast").await?,
        recv(&mut rx, deadline, "broadcast").await?,
    ];
    groups.sort_unstable();
    anyhow::ensure!(groups == ["analytics", "billing"], "groups: {groups:?}");

    // 6. A request-reply round trip.
    client
        .add_json_reply_listener("quickstart.prices", |sku: String| async move {
            Ok::<u32, anyhow::Error>(if sku == "book" { 25 } else { 10 })
        })
        .await?;
    let started = Instant::now();
    let price: u32 = client
        .request_json("quickstart.prices", &"book", Duration::from_secs(5))
        .await?;
    info!(price, took = ?started.elapsed(), "[request-reply] got the price of a book");

    client.shutdown(Duration::from_secs(5)).await?;
    if let Some(server) = server {
        server.shutdown().await;
    }
    info!("[done] every feature worked; bye");
    Ok(())
}

/// Waits for the next event of a step, or fails naming the step.
async fn recv<T>(rx: &mut mpsc::Receiver<T>, deadline: Duration, step: &str) -> anyhow::Result<T> {
    tokio::time::timeout(deadline, rx.recv())
        .await
        .with_context(|| format!("{step}: nothing arrived within {deadline:?}"))?
        .with_context(|| format!("{step}: listener gone"))
}
