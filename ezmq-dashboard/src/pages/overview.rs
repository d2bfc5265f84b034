//! `/`: every topic with its numbers and live listeners.

use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use ezmq_core::spi::Capability;
use ezmq_core::MqClient;
use serde::Deserialize;

use super::numbers;
use super::Flash;
use crate::html::{self, escape, Section};
use crate::snapshot;
use crate::sparkline;
use crate::state::AppState;

/// Runs `/`.
pub(crate) async fn show(
    State(state): State<AppState>,
    Query(flash): Query<Flash>,
) -> Html<String> {
    let client = &state.client;
    let admin = client.admin();
    let mut body = String::new();
    body.push_str(
        r#"<form method="get" action="/topic">Open a topic: <input name="name" required> <button type="submit">Open</button></form>"#,
    );
    if !admin.capabilities().has(Capability::Peek) {
        body.push_str(&html::note(
            "This broker cannot list its queues: the topics shown are those live listeners consume; open another by name.",
        ));
    }
    state.sampler.viewed();
    let snapshot = snapshot::take(admin).await;
    state.sampler.record(&snapshot);
    let participants = snapshot.participants.as_deref().unwrap_or_default();
    match &snapshot.topics {
        Err(e) => body.push_str(&html::error(&format!(
            "this broker cannot list its topics ({e}); open one by name"
        ))),
        Ok(topics) if topics.is_empty() => {
            body.push_str(r#"<p class="note">No topic yet.</p>"#);
        }
        Ok(topics) => {
            let history = state.sampler.history();
            let rows: Vec<Vec<String>> = topics
                .iter()
                .map(|(topic, read)| {
                    let link = format!(
                        r#"<a href="/topics/{}">{}</a>"#,
                        html::path_segment(topic.as_str()),
                        escape(topic.as_str())
                    );
                    let listeners = numbers::listeners_of(participants, topic.as_str());
                    match read {
                        Ok(n) => {
                            let line = sparkline::backlog(
                                &history.backlog(topic.as_str()),
                                snapshot.at_ms,
                            );
                            let mut row = vec![link];
                            row.extend(numbers::cells(n, history.rates(topic.as_str()), line));
                            row.push(listeners.to_string());
                            row
                        }
                        Err(e) => vec![link, html::error(&e.to_string())],
                    }
                })
                .collect();
            drop(history);
            let header: Vec<&str> = std::iter::once("Topic")
                .chain(numbers::COLUMNS)
                .chain(["Listeners"])
                .collect();
            body.push_str(&html::table("topics", &header, &rows));
        }
    }
    body.push_str(&html::note(RATES_NOTE));
    html::page(
        "Topics",
        Section::Topics,
        client.backend_name(),
        flash.done.as_deref(),
        &body,
    )
}

/// What the numbers and rates are.
const RATES_NOTE: &str = "Numbers as of this page's load; reload to refresh. \
    Rates are per second over the last minute, sampled every 10 s while a page of this dashboard was viewed in the last 15 minutes: \
    Done and Failed are the handler runs live listeners report; In is what the backlog grew by plus what was done. \
    The line is the backlog (waiting, scheduled and in flight) since sampling started, up to 15 minutes.";

/// `?name=` of `/topic`.
#[derive(Debug, Deserialize)]
pub(crate) struct OpenTopic {
    name: String,
}

/// Runs `/topic?name=T`: to `/topics/T`.
pub(crate) async fn open(Query(open): Query<OpenTopic>) -> Response {
    Redirect::to(&format!("/topics/{}", html::path_segment(open.name.trim()))).into_response()
}
