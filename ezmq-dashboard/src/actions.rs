//! The actions (POST): pause and resume a topic, requeue and purge its
//! dead letters, cancel and promote a scheduled job. Each is refused in
//! read-only mode and without the page's CSRF token (403), writes an audit
//! line (target `ezmq_dashboard::audit`), then sends the browser back to
//! the topic's page with what it did. A handler's `Err` is the refusal.

use std::collections::HashSet;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use ezmq_core::spi::Cancelled;
use ezmq_core::{DeadLetterSelection, JobId, MqClient, Topic};
use serde::Deserialize;
use subtle::ConstantTimeEq;
use tracing::info;

use crate::html;
use crate::pages::numbers::dead_letter_topic;
use crate::state::AppState;

/// An action's form fields.
#[derive(Debug, Deserialize)]
pub(crate) struct ActionForm {
    csrf: String,
    /// A dead letter's or job's id, for one.
    #[serde(default)]
    id: Option<String>,
    /// The topic's name, typed to confirm a purge.
    #[serde(default)]
    confirm: Option<String>,
}

/// Why an action did not run.
fn refused(status: StatusCode, why: &str) -> Response {
    (status, why.to_owned()).into_response()
}

/// The topic, after the read-only and CSRF checks.
fn admit(state: &AppState, name: &str, form: &ActionForm) -> Result<Topic, Response> {
    if state.options.is_read_only() {
        return Err(refused(
            StatusCode::FORBIDDEN,
            "this dashboard is read-only",
        ));
    }
    if !bool::from(form.csrf.as_bytes().ct_eq(state.csrf.as_bytes())) {
        return Err(refused(
            StatusCode::FORBIDDEN,
            "the form's token does not match: reload the page",
        ));
    }
    Topic::new(name).map_err(|e| refused(StatusCode::BAD_REQUEST, &e.to_string()))
}

/// The topic and its dead-letter topic, after [`admit`].
fn admit_dead_letters(
    state: &AppState,
    name: &str,
    form: &ActionForm,
) -> Result<(Topic, Topic), Response> {
    let topic = admit(state, name, form)?;
    let dead =
        dead_letter_topic(&topic).map_err(|e| refused(StatusCode::BAD_REQUEST, &e.to_string()))?;
    Ok((topic, dead))
}

/// Back to the topic's page, saying `done`.
fn back(topic: &Topic, done: &str) -> Response {
    Redirect::to(&format!(
        "/topics/{}?done={}",
        html::path_segment(topic.as_str()),
        html::path_segment(done)
    ))
    .into_response()
}

/// `POST /topics/{topic}/pause` and `/resume`.
pub(crate) async fn pause(
    State(state): State<AppState>,
    Path((name, verb)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Response> {
    let topic = admit(&state, &name, &form)?;
    let admin = state.client.admin();
    let result = match verb.as_str() {
        "pause" => admin.pause(&topic).await,
        "resume" => admin.resume(&topic).await,
        _ => return Err(refused(StatusCode::NOT_FOUND, "no such action")),
    };
    info!(target: "ezmq_dashboard::audit", action = %verb, topic = %topic, ok = result.is_ok(), "dashboard action");
    Ok(match result {
        Ok(_) => back(&topic, &format!("{verb}d")),
        Err(e) => back(&topic, &format!("{verb} failed: {e}")),
    })
}

/// `POST /topics/{topic}/dead-letters/requeue`: one (`id`) or all.
pub(crate) async fn requeue(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Response> {
    let (topic, dead) = admit_dead_letters(&state, &name, &form)?;
    let selection = match form.id.as_deref().filter(|id| !id.is_empty()) {
        Some(id) => DeadLetterSelection::Ids(HashSet::from([id.to_owned()])),
        None => DeadLetterSelection::All,
    };
    let report = state
        .client
        .admin()
        .requeue_dead_letters(&dead, selection, |_| {})
        .await;
    info!(target: "ezmq_dashboard::audit", action = "requeue", topic = %topic,
        id = form.id.as_deref().unwrap_or("all"),
        done = report.as_ref().map_or(0, |r| r.done), "dashboard action");
    Ok(match report {
        Ok(r) if r.is_complete() => back(&topic, &format!("requeued {}", r.done)),
        Ok(r) => back(
            &topic,
            &format!(
                "requeued {}; not found: {}; errors: {}",
                r.done,
                r.not_found.join(", "),
                r.errors.join("; ")
            ),
        ),
        Err(e) => back(&topic, &format!("requeue failed: {e}")),
    })
}

/// `POST /topics/{topic}/dead-letters/purge`, with `confirm` = the topic.
pub(crate) async fn purge(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Response> {
    let (topic, dead) = admit_dead_letters(&state, &name, &form)?;
    if form.confirm.as_deref().map(str::trim) != Some(topic.as_str()) {
        return Ok(back(&topic, "not purged: type the topic's name to confirm"));
    }
    let report = state.client.admin().purge(&dead, |_| {}).await;
    info!(target: "ezmq_dashboard::audit", action = "purge", topic = %topic,
        done = report.as_ref().map_or(0, |r| r.done), "dashboard action");
    Ok(match report {
        Ok(r) => back(&topic, &format!("deleted {} dead letters", r.done)),
        Err(e) => back(&topic, &format!("purge failed: {e}")),
    })
}

/// `POST /topics/{topic}/jobs/{id}/cancel` and `/promote`.
pub(crate) async fn job(
    State(state): State<AppState>,
    Path((name, id, verb)): Path<(String, String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Response> {
    let topic = admit(&state, &name, &form)?;
    let admin = state.client.admin();
    let job = JobId::new(&id);
    let done = match verb.as_str() {
        "cancel" => admin.cancel_job(&topic, &job).await.map(|c| match c {
            Cancelled::Removed => "cancelled".to_owned(),
            other => format!("not cancelled: {other:?}"),
        }),
        "promote" => admin
            .promote_job(&topic, &job)
            .await
            .map(|found| if found { "due now" } else { "not found" }.to_owned()),
        _ => return Err(refused(StatusCode::NOT_FOUND, "no such action")),
    };
    info!(target: "ezmq_dashboard::audit", action = %verb, topic = %topic, id = %id,
        ok = done.is_ok(), "dashboard action");
    Ok(match done {
        Ok(done) => back(&topic, &format!("{id}: {done}")),
        Err(e) => back(&topic, &format!("{id}: {verb} failed: {e}")),
    })
}
