//! `ezmq topics`: the topics on the broker ([`Admin::topics`](ezmq::Admin::topics))
//! with how many live listeners consume each.

use std::collections::BTreeMap;

use ezmq::{Client, MqClient, Topic};
use serde::Serialize;

use crate::exit::{CliResult, Context};
use crate::table::{print_json, print_text, Table};

/// One topic, as printed.
#[derive(Debug, Serialize)]
struct TopicRow {
    topic: String,
    /// Live listeners consuming it (broadcast group members included).
    listeners: usize,
}

/// Every user topic on the broker, sorted.
pub(super) async fn all(client: &Client) -> CliResult<Vec<Topic>> {
    client
        .admin()
        .topics()
        .await
        .context(|| "listing the topics".to_owned())
}

/// Runs `ezmq topics`.
pub(crate) async fn run(client: &Client, json: bool) -> CliResult<()> {
    let topics = all(client).await?;
    let mut listeners: BTreeMap<String, usize> = BTreeMap::new();
    if client.admin().has_presence() {
        let live = client
            .admin()
            .participants()
            .await
            .context(|| "reading the live listeners".to_owned())?;
        for listener in live.iter().flat_map(|p| &p.listeners) {
            *listeners.entry(listener.topic.clone()).or_default() += 1;
        }
    }
    let rows: Vec<TopicRow> = topics
        .into_iter()
        .map(|t| TopicRow {
            listeners: listeners.get(t.as_str()).copied().unwrap_or(0),
            topic: t.to_string(),
        })
        .collect();
    if json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        return print_text("no topic\n");
    }
    let mut table = Table::new(["TOPIC", "LISTENERS"]);
    for row in &rows {
        table.row([row.topic.clone(), row.listeners.to_string()]);
    }
    print_text(&table.render())
}
