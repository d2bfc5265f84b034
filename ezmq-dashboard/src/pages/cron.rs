//! `/cron`: the crontabs running now, with their recent runs.

use axum::extract::State;
use axum::response::Html;
use ezmq_core::MqClient;

use crate::html::{self, escape, Section};
use crate::state::AppState;

/// Runs shown per crontab.
const RUNS: usize = 5;

/// Runs `/cron`.
pub(crate) async fn show(State(state): State<AppState>) -> Html<String> {
    let client = &state.client;
    let mut body = String::new();
    match ezmq_crontab::announced_crontabs(client).await {
        Err(e) => body.push_str(&html::error(&format!("cannot list crontabs here: {e}"))),
        Ok(crontabs) if crontabs.is_empty() => {
            body.push_str(r#"<p class="note">No crontab running.</p>"#);
        }
        Ok(crontabs) => {
            let rows: Vec<Vec<String>> = crontabs
                .iter()
                .map(|c| {
                    vec![
                        escape(&c.name),
                        format!("<code>{}</code>", escape(&c.spec)),
                        escape(&c.timezone),
                        c.next_tick
                            .map_or_else(|| "-".to_owned(), |t| html::time(t.into())),
                        c.last_tick
                            .map_or_else(|| "-".to_owned(), |t| html::time(t.into())),
                        escape(&c.participants.join(", ")),
                    ]
                })
                .collect();
            body.push_str(&html::table(
                "crontabs",
                &[
                    "Name",
                    "Spec",
                    "Time zone",
                    "Next tick",
                    "Last tick",
                    "Running in",
                ],
                &rows,
            ));
            for c in &crontabs {
                body.push_str(&format!("<h2>Recent runs of {}</h2>", escape(&c.name)));
                match ezmq_crontab::cron_history(client, &c.name, RUNS).await {
                    Ok(runs) => {
                        let rows: Vec<Vec<String>> = runs
                            .iter()
                            .map(|r| {
                                vec![
                                    html::time(r.tick.into()),
                                    escape(&r.participant),
                                    format!("{} ms", r.duration_ms),
                                    r.outcome.name().to_owned(),
                                    escape(r.error.as_deref().unwrap_or("")),
                                ]
                            })
                            .collect();
                        body.push_str(&html::table(
                            "runs",
                            &["Tick", "Ran in", "Duration", "Outcome", "Error"],
                            &rows,
                        ));
                    }
                    Err(ezmq_core::Error::Unsupported { .. }) => body.push_str(&html::note(
                        "This broker cannot peek, so it keeps no run history: the last tick above is the newest a running process reported.",
                    )),
                    Err(e) => body.push_str(&html::error(&e.to_string())),
                }
            }
        }
    }
    html::page("Cron", Section::Cron, client.backend_name(), None, &body)
}
