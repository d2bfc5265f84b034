//! A worker with a concurrency limit, retries and a dead-letter topic.
//!
//! ```sh
//! cargo run --example worker
//! ```
//!
//! Pushes ten orders; order 7 always fails, so after three attempts it lands
//! in `orders.failed`, where a second listener reads the dead-letter record.

mod support;

use std::time::Duration;

use ezmq::prelude::*;
use ezmq::{ConsumeOptions, DeadLetterRecord, Job};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tracing::{info, warn};

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    id: u32,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    support::init_logging();
    let (url, server) = support::broker().await?;
    let client = ezmq::connect_url(&url).await?;

    let (done_tx, mut done_rx) = mpsc::channel(16);
    let options = ConsumeOptions::new()
        .with_concurrency(4) // at most four orders at once in this process
        .with_max_attempts(3)
        .with_backoff(Duration::from_millis(100), Duration::from_secs(1))
        .with_dead_letter_topic("orders.failed");
    let tx = done_tx.clone();
    client
        .add_json_listener_with("orders", options, move |order: Order| {
            let tx = tx.clone();
            async move {
                if order.id == 7 {
                    warn!(order = order.id, "payment provider rejected the order");
                    anyhow::bail!("card declined for order {}", order.id);
                }
                tokio::time::sleep(Duration::from_millis(50)).await; // the work
                info!(order = order.id, "order processed");
                let _ = tx.send(()).await;
                Ok(())
            }
        })
        .await?;

    client
        .add_consume_listener("orders.failed", move |job: Job| {
            let tx = done_tx.clone();
            async move {
                let record: DeadLetterRecord = job.json()?;
                warn!(
                    from = %record.topic,
                    attempts = record.attempts,
                    error = %record.error,
                    "dead letter received"
                );
                let _ = tx.send(()).await;
                Ok::<(), ezmq::Error>(())
            }
        })
        .await?;

    for id in 1..=10 {
        client.push_json("orders", &Order { id }).await?;
    }
    // Nine processed orders and one dead letter.
    for _ in 0..10 {
        tokio::time::timeout(Duration::from_secs(20), done_rx.recv()).await?;
    }
    client.shutdown(Duration::from_secs(5)).await?;
    if let Some(server) = server {
        server.shutdown().await;
    }
    Ok(())
}
