//! `/processes`: the clients running listeners and crontabs now.

use axum::extract::State;
use axum::response::Html;
use ezmq_core::MqClient;

use crate::html::{self, escape, Section};
use crate::state::AppState;

/// Runs `/processes`.
pub(crate) async fn show(State(state): State<AppState>) -> Html<String> {
    let client = &state.client;
    let mut body = String::new();
    match client.admin().participants().await {
        Err(e) => body.push_str(&html::error(&format!("cannot list processes here: {e}"))),
        Ok(participants) if participants.is_empty() => {
            body.push_str(r#"<p class="note">No listener or crontab running.</p>"#);
        }
        Ok(participants) => {
            let mut rows = Vec::new();
            for p in &participants {
                for l in &p.listeners {
                    rows.push(vec![
                        escape(&p.process),
                        "listener".to_owned(),
                        format!(
                            r#"<a href="/topics/{}">{}</a>"#,
                            html::path_segment(&l.topic),
                            escape(&l.topic)
                        ),
                        escape(l.group.as_deref().unwrap_or("-")),
                        l.concurrency.to_string(),
                        l.in_flight.to_string(),
                        l.succeeded.to_string(),
                        l.failed.to_string(),
                        html::time_ms(l.started_at_ms),
                        html::time_ms(p.announced_at_ms),
                    ]);
                }
                for e in &p.entries {
                    rows.push(vec![
                        escape(&p.process),
                        escape(&e.kind),
                        escape(&e.name),
                        "-".to_owned(),
                        "-".to_owned(),
                        "-".to_owned(),
                        "-".to_owned(),
                        "-".to_owned(),
                        "-".to_owned(),
                        html::time_ms(p.announced_at_ms),
                    ]);
                }
            }
            body.push_str(&html::table(
                "processes",
                &[
                    "Process",
                    "Kind",
                    "Name",
                    "Group",
                    "Concurrency",
                    "In flight",
                    "Done",
                    "Failed",
                    "Started",
                    "Last seen",
                ],
                &rows,
            ));
        }
    }
    body.push_str(
        r#"<p class="note">Each process writes what it runs every 5 s; one that died leaves within 15 s.</p>"#,
    );
    html::page(
        "Processes",
        Section::Processes,
        client.backend_name(),
        None,
        &body,
    )
}
