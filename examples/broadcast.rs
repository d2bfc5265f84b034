//! Broadcast groups: every group of a topic gets each event; inside a group
//! the members share the work.
//!
//! ```sh
//! cargo run --example broadcast
//! ```
//!
//! Two groups (`billing` with two members, `search` with one) receive six
//! `user.created` events and one delayed event.

mod support;

use std::time::Duration;

use ezmq::prelude::*;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tracing::info;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct UserCreated {
    id: u32,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    support::init_logging();
    let (url, server) = support::broker().await?;
    let client = ezmq::connect_url(&url).await?;

    let (tx, mut rx) = mpsc::channel(32);
    for (group, member) in [("billing", 1), ("billing", 2), ("search", 1)] {
        let tx = tx.clone();
        client
            .add_broadcast_json_listener("user.created", group, move |event: UserCreated| {
                let tx = tx.clone();
                async move {
                    info!(group, member, user = event.id, "event handled");
                    let _ = tx.send(group).await;
                    Ok::<(), anyhow::Error>(())
                }
            })
            .await?;
    }

    for id in 1..=6 {
        let receipt = client
            .push_broadcast_json("user.created", &UserCreated { id })
            .await?;
        info!(user = id, groups = receipt.group_count(), "event broadcast");
    }
    let receipt = client
        .push_broadcast_delay(
            "user.created",
            serde_json::to_vec(&UserCreated { id: 7 })?.into(),
            Duration::from_secs(2),
        )
        .await?;
    info!(
        groups = receipt.group_count(),
        "delayed event broadcast (2s)"
    );

    // 7 events x 2 groups.
    for _ in 0..14 {
        tokio::time::timeout(Duration::from_secs(10), rx.recv()).await?;
    }
    client.shutdown(Duration::from_secs(5)).await?;
    if let Some(server) = server {
        server.shutdown().await;
    }
    Ok(())
}
