//! `/topics/{topic}`: a topic's numbers, its waiting, scheduled and
//! dead-lettered jobs, its live listeners, and the actions on them.

use std::fmt::Write;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ezmq_core::spi::Capability;
use ezmq_core::{DeadLetterRecord, Job, MqClient, Topic};

use super::numbers::{self, dead_letter_topic};
use super::Flash;
use crate::html::{self, escape, Section};
use crate::snapshot::now_ms;
use crate::sparkline;
use crate::state::AppState;

/// Jobs shown per list.
const SHOWN: usize = 50;
/// Characters of a body shown.
const BODY_CHARS: usize = 300;

/// Runs `/topics/{topic}`.
pub(crate) async fn show(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(flash): Query<Flash>,
) -> Response {
    let topic = match Topic::new(&name) {
        Ok(topic) => topic,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, html::error(&e.to_string())).into_response();
        }
    };
    let client = &state.client;
    let admin = client.admin();
    let caps = admin.capabilities();
    let actions = !state.options.is_read_only();
    let csrf = &*state.csrf;
    let base = format!("/topics/{}", html::path_segment(topic.as_str()));
    let mut body = String::new();

    state.sampler.viewed();
    match numbers::read(admin, &topic).await {
        Ok(n) => {
            let (rates, line) = {
                let history = state.sampler.history();
                let line = sparkline::backlog(&history.backlog(topic.as_str()), now_ms());
                (history.rates(topic.as_str()), line)
            };
            body.push_str(&html::table(
                "numbers",
                &numbers::COLUMNS,
                &[numbers::cells(&n, rates, line)],
            ));
            if actions && n.paused.is_some() {
                let (path, label) = if n.paused == Some(true) {
                    ("resume", "Resume")
                } else {
                    ("pause", "Pause")
                };
                body.push_str(&html::button(&format!("{base}/{path}"), label, csrf, &[]));
            }
        }
        Err(e) => body.push_str(&html::error(&e.to_string())),
    }

    body.push_str("<h2>Listeners</h2>");
    if admin.has_presence() {
        match admin.participants().await {
            Ok(participants) => {
                let rows: Vec<Vec<String>> = participants
                    .iter()
                    .flat_map(|p| p.listeners.iter().map(move |l| (p, l)))
                    .filter(|(_, l)| l.topic == topic.as_str())
                    .map(|(p, l)| {
                        vec![
                            escape(&p.process),
                            escape(l.group.as_deref().unwrap_or("-")),
                            l.concurrency.to_string(),
                            l.in_flight.to_string(),
                            l.succeeded.to_string(),
                            l.failed.to_string(),
                            if l.paused { "yes" } else { "no" }.to_owned(),
                            html::time_ms(l.started_at_ms),
                            html::time_ms(p.announced_at_ms),
                        ]
                    })
                    .collect();
                body.push_str(&html::table(
                    "listeners",
                    &[
                        "Process",
                        "Group",
                        "Concurrency",
                        "In flight",
                        "Done",
                        "Failed",
                        "Paused",
                        "Started",
                        "Last seen",
                    ],
                    &rows,
                ));
            }
            Err(e) => body.push_str(&html::error(&e.to_string())),
        }
    } else {
        body.push_str(&not_here(client.backend_name(), "list live listeners"));
    }

    body.push_str("<h2>Waiting</h2>");
    if caps.has(Capability::Peek) {
        match admin.peek(&topic, SHOWN).await {
            Ok(jobs) => body.push_str(&jobs_table("waiting", &jobs)),
            Err(e) => body.push_str(&html::error(&e.to_string())),
        }
    } else {
        body.push_str(&not_here(
            client.backend_name(),
            "read waiting jobs without taking them",
        ));
    }

    body.push_str("<h2>Scheduled and retrying</h2>");
    if caps.has(Capability::JobStore) {
        match admin.scheduled(&topic, SHOWN).await {
            Ok(infos) => {
                let rows: Vec<Vec<String>> = infos
                    .iter()
                    .map(|info| {
                        let id = info.job.id().as_str();
                        let mut buttons = String::new();
                        if actions {
                            let path = format!("{base}/jobs/{}", html::path_segment(id));
                            buttons.push_str(&html::button(
                                &format!("{path}/promote"),
                                "Run now",
                                csrf,
                                &[],
                            ));
                            buttons.push_str(&html::button(
                                &format!("{path}/cancel"),
                                "Cancel",
                                csrf,
                                &[],
                            ));
                        }
                        vec![
                            format!("<code>{}</code>", escape(id)),
                            info.state.name().to_owned(),
                            info.due_at.map_or_else(|| "-".to_owned(), html::time),
                            info.job.attempt().to_string(),
                            body_cell(&info.job),
                            buttons,
                        ]
                    })
                    .collect();
                body.push_str(&html::table(
                    "scheduled",
                    &["Id", "State", "Due", "Attempt", "Body", ""],
                    &rows,
                ));
            }
            Err(e) => body.push_str(&html::error(&e.to_string())),
        }
    } else {
        body.push_str(&not_here(client.backend_name(), "list scheduled jobs"));
    }

    body.push_str("<h2>Dead letters</h2>");
    match dead_letter_topic(&topic) {
        Ok(dead) if caps.has(Capability::Peek) => match admin.peek(&dead, SHOWN).await {
            Ok(jobs) => body.push_str(&dead_letters(&base, csrf, actions, &jobs)),
            Err(e) => body.push_str(&html::error(&e.to_string())),
        },
        Ok(_) => {
            body.push_str(&not_here(
                client.backend_name(),
                "read dead letters without taking them",
            ));
            if actions {
                body.push_str(&html::button(
                    &format!("{base}/dead-letters/requeue"),
                    "Requeue all",
                    csrf,
                    &[],
                ));
            }
        }
        Err(e) => body.push_str(&html::error(&e.to_string())),
    }

    html::page(
        topic.as_str(),
        Section::Topics,
        client.backend_name(),
        flash.done.as_deref(),
        &body,
    )
    .into_response()
}

/// A note that the broker cannot do `what`.
fn not_here(backend: &str, what: &str) -> String {
    format!(
        r#"<p class="note">The {} broker cannot {}.</p>"#,
        escape(backend),
        escape(what)
    )
}

/// The body cell of a job: text, clipped, escaped.
fn body_cell(job: &Job) -> String {
    let text = String::from_utf8_lossy(job.body());
    format!("<code>{}</code>", escape(&html::clip(&text, BODY_CHARS)))
}

fn headers_cell(job: &Job) -> String {
    let mut out = String::new();
    for (name, value) in job.headers().iter() {
        let _ = write!(out, "{}={} ", escape(name), escape(value));
    }
    format!("<code>{}</code>", out.trim_end())
}

fn jobs_table(id: &str, jobs: &[Job]) -> String {
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|job| {
            vec![
                format!("<code>{}</code>", escape(job.id().as_str())),
                job.attempt().to_string(),
                headers_cell(job),
                body_cell(job),
            ]
        })
        .collect();
    html::table(id, &["Id", "Attempt", "Headers", "Body"], &rows)
}

/// The dead letters, each with a requeue button, then requeue-all and
/// purge (which asks for the topic's name).
fn dead_letters(base: &str, csrf: &str, actions: bool, jobs: &[Job]) -> String {
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|job| {
            let id = job.id().as_str();
            let record = DeadLetterRecord::from_job(job).ok();
            let button = if actions {
                html::button(
                    &format!("{base}/dead-letters/requeue"),
                    "Requeue",
                    csrf,
                    &[("id", id)],
                )
            } else {
                String::new()
            };
            match record {
                Some(r) => vec![
                    format!("<code>{}</code>", escape(&r.job_id)),
                    r.attempts.to_string(),
                    format!("<code>{}</code>", escape(&html::clip(&r.error, BODY_CHARS))),
                    html::time_ms(i64::try_from(r.failed_at_ms).unwrap_or(i64::MAX)),
                    format!(
                        "<code>{}</code>",
                        escape(&html::clip(&String::from_utf8_lossy(&r.body()), BODY_CHARS))
                    ),
                    button,
                ],
                None => vec![
                    format!("<code>{}</code>", escape(id)),
                    "-".to_owned(),
                    "not a dead-letter record".to_owned(),
                    "-".to_owned(),
                    body_cell(job),
                    String::new(),
                ],
            }
        })
        .collect();
    let mut out = html::table(
        "dead-letters",
        &["Job", "Attempts", "Error", "Failed at", "Body", ""],
        &rows,
    );
    if actions && !jobs.is_empty() {
        out.push_str(&html::button(
            &format!("{base}/dead-letters/requeue"),
            "Requeue all",
            csrf,
            &[],
        ));
        let _ = write!(
            out,
            r#"<form class="inline" method="post" action="{}/dead-letters/purge"><input type="hidden" name="csrf" value="{}">Type the topic's name to delete every dead letter: <input name="confirm" autocomplete="off"> <button type="submit">Purge</button></form>"#,
            escape(base),
            escape(csrf),
        );
    }
    out
}
