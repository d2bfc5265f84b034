//! Distributed cron: run this in several terminals against the same broker
//! and each tick runs in exactly one of them.
//!
//! ```sh
//! cargo run -p ezmq-disque-server -- --port 7711                 # terminal 1
//! EZMQ_URL=disque://127.0.0.1:7711 cargo run --example cron      # terminals 2, 3, 4
//! EZMQ_URL=redis://127.0.0.1:6379 cargo run --example cron       # or on Redis
//! ```
//!
//! Stop any of the workers: the others keep the schedule going. Without
//! `EZMQ_URL` it runs alone on an embedded server. Stops after
//! `CRON_SECONDS` (default 30) or on Ctrl-C.

mod support;

use std::time::Duration;

use chrono::{DateTime, Utc};
use ezmq::prelude::*;
use tracing::info;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    support::init_logging();
    let (url, server) = support::broker().await?;
    if server.is_some() {
        // Each process would start its own server and run every tick:
        // say how to share one instead of pretending to be distributed.
        tracing::warn!(
            "running alone on a private embedded server: every process started like this \
             runs every tick. To share the ticks, start one broker \
             (`cargo run -p ezmq-disque-server -- --port 7711`) and run each copy with \
             EZMQ_URL=disque://127.0.0.1:7711 (or a redis:// or amqp:// URL)"
        );
    }
    let client = ezmq::connect_url(&url).await?;
    let me = std::process::id();

    // Every five seconds, on whichever process wins the tick.
    client
        .add_crontab(
            "report",
            "0/5 * * * * *",
            move |tick: DateTime<Utc>| async move {
                info!(%tick, pid = me, "building the report for this tick");
                Ok::<(), anyhow::Error>(())
            },
        )
        .await?;
    for cron in client.crontabs() {
        info!(name = %cron.name, next = %cron.next_tick.map(|t| t.to_string()).unwrap_or_default(), "registered");
    }

    let seconds = std::env::var("CRON_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    tokio::select! {
        _ = tokio::signal::ctrl_c() => info!("Ctrl-C"),
        () = tokio::time::sleep(Duration::from_secs(seconds)) => {}
    }
    client.shutdown(Duration::from_secs(5)).await?;
    if let Some(server) = server {
        server.shutdown().await;
    }
    Ok(())
}
