//! Helpers shared by the broadcast integration tests.

#![allow(dead_code, unreachable_pub)]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use ezmq_broadcast::{BroadcastConfig, BroadcastExt, BroadcastListener};
use ezmq_core::{handler_fn, Client, ConsumeOptions, Job, MqClient};
use ezmq_test_support::TestBroker;
use tokio::sync::mpsc;

/// Generous bound for anything that should happen "soon".
pub const PATIENCE: Duration = Duration::from_secs(30);

/// One delivery seen by a test member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub group: String,
    pub member: String,
    pub body: String,
}

/// A client of `broker` with broadcast settings `config`.
pub async fn client_with(broker: &TestBroker, config: BroadcastConfig) -> Client {
    let client = broker.client().await;
    client.set_broadcast_config(config).expect("valid config");
    client
}

/// Adds a member of `group` named `member` that reports every delivery on
/// `tx` (after `work` of simulated processing).
pub async fn add_member(
    client: &Client,
    topic: &str,
    group: &str,
    member: &str,
    options: ConsumeOptions,
    work: Duration,
    tx: mpsc::UnboundedSender<Delivery>,
) -> BroadcastListener {
    let (group_name, member) = (group.to_owned(), member.to_owned());
    let handler = handler_fn(move |job: Job| {
        let tx = tx.clone();
        let delivery = Delivery {
            group: group_name.clone(),
            member: member.clone(),
            body: String::from_utf8_lossy(job.body()).into_owned(),
        };
        async move {
            if !work.is_zero() {
                tokio::time::sleep(work).await;
            }
            let _ = tx.send(delivery);
            Ok::<(), Infallible>(())
        }
    });
    client
        .add_broadcast_listener_with(topic, group, Arc::new(handler), options)
        .await
        .expect("add broadcast listener")
}

/// The next delivery, failing the test after [`PATIENCE`].
pub async fn next(rx: &mut mpsc::UnboundedReceiver<Delivery>) -> Delivery {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("a delivery within the patience")
        .expect("channel open")
}

/// Asserts nothing more arrives within `quiet`.
pub async fn assert_quiet(rx: &mut mpsc::UnboundedReceiver<Delivery>, quiet: Duration) {
    if let Ok(Some(extra)) = tokio::time::timeout(quiet, rx.recv()).await {
        panic!("unexpected extra delivery {extra:?}");
    }
}

/// Shuts every client down.
pub async fn shutdown_all(clients: &[&Client]) {
    for client in clients {
        let _ = client.shutdown(Duration::from_secs(1)).await;
    }
}
