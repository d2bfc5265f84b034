//! `/groups`: the broadcast groups of every topic live group members
//! consume, with their live members and waiting messages
//! ([`Admin::groups`](ezmq_core::Admin::groups)); `?topic=` adds one by
//! name (a topic whose members are all stopped).

use std::collections::BTreeSet;

use axum::extract::{Query, State};
use axum::response::Html;
use ezmq_core::spi::Capability;
use ezmq_core::{MqClient, Topic};
use serde::Deserialize;

use crate::html::{self, escape, Section};
use crate::state::AppState;

/// `?topic=` of `/groups`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct GroupsQuery {
    topic: Option<String>,
}

/// Runs `/groups`.
pub(crate) async fn show(
    State(state): State<AppState>,
    Query(query): Query<GroupsQuery>,
) -> Html<String> {
    let client = &state.client;
    let admin = client.admin();
    let mut body = String::new();
    body.push_str(
        r#"<form method="get" action="/groups">Groups of a broadcast topic: <input name="topic" required> <button type="submit">Show</button></form>"#,
    );
    if !admin.capabilities().has(Capability::FanOut) {
        body.push_str(&html::note(&format!(
            "{} has no broadcast groups.",
            client.backend_name()
        )));
        return html::page(
            "Groups",
            Section::Groups,
            client.backend_name(),
            None,
            &body,
        );
    }
    let mut topics = BTreeSet::new();
    let mut processes = Vec::new();
    if admin.has_presence() {
        match admin.participants().await {
            Ok(participants) => {
                for p in &participants {
                    for l in p.listeners.iter().filter(|l| l.group.is_some()) {
                        topics.insert(l.topic.clone());
                        processes.push((l.topic.clone(), l.group.clone(), p.process.clone()));
                    }
                }
            }
            Err(e) => body.push_str(&html::error(&e.to_string())),
        }
    }
    if let Some(asked) = query.topic.as_deref().map(str::trim) {
        topics.insert(asked.to_owned());
    }
    let mut rows = Vec::new();
    for name in &topics {
        let topic = match Topic::new(name) {
            Ok(topic) => topic,
            Err(e) => {
                body.push_str(&html::error(&e.to_string()));
                continue;
            }
        };
        let link = format!(
            r#"<a href="/groups?topic={}">{}</a>"#,
            html::path_segment(name),
            escape(name)
        );
        match admin.groups(&topic).await {
            Ok(Some(groups)) if !groups.is_empty() => {
                for g in groups {
                    let running: Vec<String> = processes
                        .iter()
                        .filter(|(t, group, _)| t == name && group.as_deref() == Some(&g.name))
                        .map(|(_, _, process)| escape(process))
                        .collect();
                    rows.push(vec![
                        link.clone(),
                        escape(&g.name),
                        html::count(g.members),
                        html::count(g.waiting),
                        if running.is_empty() {
                            "-".to_owned()
                        } else {
                            running.join("<br>")
                        },
                    ]);
                }
            }
            Ok(Some(_)) => rows.push(vec![link, "none".to_owned()]),
            Ok(None) => rows.push(vec![link, html::note("this broker cannot list its groups")]),
            Err(e) => rows.push(vec![link, html::error(&e.to_string())]),
        }
    }
    if rows.is_empty() {
        body.push_str(r#"<p class="note">No broadcast group member running; show a topic's groups by name.</p>"#);
    } else {
        body.push_str(&html::table(
            "groups",
            &["Topic", "Group", "Live members", "Waiting", "Processes"],
            &rows,
        ));
    }
    html::page(
        "Groups",
        Section::Groups,
        client.backend_name(),
        None,
        &body,
    )
}
