//! `/health`: the broker's health ([`Admin::health`](ezmq_core::Admin::health)):
//! its server, facts, and nodes up or down.

use axum::extract::State;
use axum::response::Html;
use ezmq_core::{BrokerHealth, Error, MqClient};

use crate::html::{self, escape, Section};
use crate::state::AppState;

/// Runs `/health`.
pub(crate) async fn show(State(state): State<AppState>) -> Html<String> {
    let client = &state.client;
    let body = match client.admin().health().await {
        Ok(health) => report(&health),
        Err(e) => {
            // The page says what kind of failure it was; the error's text
            // (which can name the broker's address) goes to the log only.
            tracing::warn!(cause = %e, "reading the broker's health failed");
            html::error(&format!("cannot read the broker's health: {}", failure(&e)))
        }
    };
    html::page(
        "Health",
        Section::Health,
        client.backend_name(),
        None,
        &body,
    )
}

/// The report: a summary line, the facts, the nodes. Every value escaped.
fn report(health: &BrokerHealth) -> String {
    let total = health.nodes.len();
    let down = health.nodes.iter().filter(|node| !node.up).count();
    let summary = match (total, down) {
        (0, _) => "no node reported".to_owned(),
        (1, 0) => "up".to_owned(),
        (n, 0) => format!("all {n} nodes up"),
        (1, _) => "<strong>down</strong>".to_owned(),
        (n, d) => format!("<strong>{d} of {n} nodes down</strong>"),
    };
    let mut out = format!(
        r#"<p id="server"><strong>{}</strong>: {summary}</p>"#,
        escape(&health.server)
    );
    let facts: Vec<Vec<String>> = health
        .facts
        .iter()
        .map(|(label, value)| vec![escape(label), escape(value)])
        .collect();
    out.push_str(&html::table("facts", &["Fact", "Value"], &facts));
    let nodes: Vec<Vec<String>> = health
        .nodes
        .iter()
        .map(|node| {
            let facts: Vec<String> = node
                .facts
                .iter()
                .map(|(label, value)| format!("{}: {}", escape(label), escape(value)))
                .collect();
            vec![
                escape(&node.name),
                if node.up {
                    "up".to_owned()
                } else {
                    "<strong>down</strong>".to_owned()
                },
                facts.join("<br>"),
            ]
        })
        .collect();
    out.push_str(&html::table("nodes", &["Node", "State", "Facts"], &nodes));
    out.push_str(&html::note(
        "Read from the broker at each page load; a node that does not answer is shown down. \
         No address or credential is ever shown.",
    ));
    out
}

/// What kind of failure `e` is, in words that hold nothing of the
/// broker's address or credentials.
fn failure(e: &Error) -> &'static str {
    match e {
        Error::Shutdown => "the client is shut down",
        Error::Unsupported { .. } => "the broker cannot tell",
        e if e.is_timeout() => "no answer in time",
        e if e.is_connection_error() => "the broker cannot be reached",
        _ => "the broker's answer could not be used (the service's log says why)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ezmq_core::NodeHealth;

    #[test]
    fn escapes_and_counts_nodes() {
        let health = BrokerHealth::new("<Redis>")
            .with_fact("version", "7 & up")
            .with_node(NodeHealth::up("a"))
            .with_node(NodeHealth::down("b<"));
        let page = report(&health);
        assert!(page.contains("&lt;Redis&gt;"), "{page}");
        assert!(page.contains("7 &amp; up"), "{page}");
        assert!(page.contains("1 of 2 nodes down"), "{page}");
        assert!(page.contains("b&lt;"), "{page}");
        assert!(!page.contains("<Redis>"), "{page}");
    }

    #[test]
    fn failures_hold_no_address() {
        let e = Error::connect("10.1.2.3:6379", std::io::Error::other("refused"));
        assert!(!failure(&e).contains("10.1.2.3"));
        assert_eq!(failure(&Error::Shutdown), "the client is shut down");
    }
}
