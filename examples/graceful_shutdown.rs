//! Graceful shutdown on Ctrl-C: stop fetching, let running jobs finish,
//! give the rest back to the broker. Nothing is lost, nothing is
//! acknowledged unprocessed.
//!
//! ```sh
//! cargo run --example graceful_shutdown      # then press Ctrl-C
//! ```
//!
//! Without a Ctrl-C it shuts itself down after `SHUTDOWN_AFTER_SECS`
//! (default 5) seconds.

mod support;

use std::time::Duration;

use ezmq::prelude::*;
use ezmq::{ConsumeOptions, Job};
use tracing::info;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    support::init_logging();
    let (url, server) = support::broker().await?;
    let client = ezmq::connect_url(&url).await?;

    for n in 0..20 {
        client.push("slow.jobs", format!("job {n}").into()).await?;
    }
    client
        .add_consume_listener_with(
            "slow.jobs",
            ConsumeOptions::new().with_concurrency(2),
            |job: Job| async move {
                tokio::time::sleep(Duration::from_millis(800)).await; // the work
                info!(body = %String::from_utf8_lossy(job.body()), "done");
                Ok::<(), anyhow::Error>(())
            },
        )
        .await?;

    let after = std::env::var("SHUTDOWN_AFTER_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    tokio::select! {
        _ = tokio::signal::ctrl_c() => info!("Ctrl-C: shutting down"),
        () = tokio::time::sleep(Duration::from_secs(after)) => info!("shutting down"),
    }
    // Running jobs get 10 s to finish; jobs not started stay in the queue.
    client.shutdown(Duration::from_secs(10)).await?;
    let check = ezmq::connect_url(&url).await?;
    info!(
        left = check.queue_len("slow.jobs").await?,
        "jobs left for the next worker"
    );
    check.shutdown(Duration::from_secs(1)).await?;
    if let Some(server) = server {
        server.shutdown().await;
    }
    Ok(())
}
