//! `/`: every topic with its numbers and live listeners.

use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use ezmq_core::spi::Capability;
use ezmq_core::{MqClient, Topic};
use futures::StreamExt;
use serde::Deserialize;

use super::numbers::{self, DEAD_LETTER_SUFFIX};
use super::Flash;
use crate::html::{self, escape, Section};
use crate::state::AppState;

/// Topics read at the same time.
const PARALLEL_READS: usize = 16;

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
    let participants = if admin.has_presence() {
        admin.participants().await.unwrap_or_default()
    } else {
        Vec::new()
    };
    match admin.topics().await {
        Err(e) => body.push_str(&html::error(&format!(
            "this broker cannot list its topics ({e}); open one by name"
        ))),
        Ok(topics) => {
            let topics: Vec<Topic> = topics
                .into_iter()
                .filter(|t| !t.as_str().ends_with(DEAD_LETTER_SUFFIX))
                .collect();
            let rows: Vec<Vec<String>> = futures::stream::iter(topics)
                .map(|topic| {
                    let participants = &participants;
                    async move {
                        let link = format!(
                            r#"<a href="/topics/{}">{}</a>"#,
                            html::path_segment(topic.as_str()),
                            escape(topic.as_str())
                        );
                        let listeners = numbers::listeners_of(participants, topic.as_str());
                        match numbers::read(admin, &topic).await {
                            Ok(n) => vec![
                                link,
                                html::count(n.waiting),
                                html::count(n.scheduled),
                                html::count(n.in_flight),
                                html::count(n.dead_letters),
                                n.paused
                                    .map_or("-", |p| if p { "yes" } else { "no" })
                                    .to_owned(),
                                listeners.to_string(),
                            ],
                            Err(e) => vec![link, html::error(&e.to_string())],
                        }
                    }
                })
                .buffered(PARALLEL_READS)
                .collect()
                .await;
            if rows.is_empty() {
                body.push_str(r#"<p class="note">No topic yet.</p>"#);
            } else {
                body.push_str(&html::table(
                    "topics",
                    &[
                        "Topic",
                        "Waiting",
                        "Scheduled",
                        "In flight",
                        "Dead letters",
                        "Paused",
                        "Listeners",
                    ],
                    &rows,
                ));
            }
        }
    }
    body.push_str(r#"<p class="note">Numbers as of this page's load; reload to refresh.</p>"#);
    html::page(
        "Topics",
        Section::Topics,
        client.backend_name(),
        flash.done.as_deref(),
        &body,
    )
}

/// `?name=` of `/topic`.
#[derive(Debug, Deserialize)]
pub(crate) struct OpenTopic {
    name: String,
}

/// Runs `/topic?name=T`: to `/topics/T`.
pub(crate) async fn open(Query(open): Query<OpenTopic>) -> Response {
    Redirect::to(&format!("/topics/{}", html::path_segment(open.name.trim()))).into_response()
}
