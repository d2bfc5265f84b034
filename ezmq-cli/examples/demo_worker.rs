//! A worker to try the `ezmq` command against: a consume listener on
//! `orders` that fails while the file `$DOWN_FILE` exists (so jobs end in
//! `orders.dead-letter` after two attempts), a broadcast listener in group
//! `billing` of `order-events`, and a crontab `report` every 10 s.
//!
//! ```sh
//! ezmq serve &                                   # or any broker
//! export EZMQ_URL=disque://127.0.0.1:7711
//! DOWN_FILE=/tmp/down cargo run -p ezmq-cli --example demo_worker
//! ```
//!
//! Runs until Ctrl-C.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ezmq::prelude::*;
use ezmq::{handler_fn, ConsumeOptions, Job};

#[tokio::main]
async fn main() -> ezmq::Result<()> {
    let url = std::env::var("EZMQ_URL").unwrap_or_else(|_| "disque://127.0.0.1:7711".into());
    let down: Option<PathBuf> = std::env::var_os("DOWN_FILE").map(PathBuf::from);
    let client = ezmq::connect_url(&url).await?;
    client
        .add_consume_listener_with(
            "orders",
            ConsumeOptions::new()
                .with_max_attempts(2)
                .with_backoff(Duration::from_millis(100), Duration::from_secs(1)),
            move |job: Job| {
                let down = down.clone();
                async move {
                    if down.is_some_and(|f| f.exists()) {
                        println!("order {} failed (attempt {})", job.id(), job.attempt());
                        return Err(std::io::Error::other("payment service unavailable"));
                    }
                    println!("order {} handled: {:?}", job.id(), job.body());
                    Ok(())
                }
            },
        )
        .await?;
    let events = handler_fn(|job: Job| async move {
        println!("billing got event {:?}", job.body());
        Ok::<(), std::io::Error>(())
    });
    client
        .add_broadcast_listener("order-events", "billing", Arc::new(events))
        .await?;
    client
        .add_crontab(
            "report",
            "0/10 * * * * *",
            |tick: DateTime<Utc>| async move {
                println!("report for {tick}");
                Ok::<(), std::io::Error>(())
            },
        )
        .await?;
    println!("worker running on {url}; Ctrl-C to stop");
    let _ = tokio::signal::ctrl_c().await;
    client.shutdown(Duration::from_secs(10)).await
}
