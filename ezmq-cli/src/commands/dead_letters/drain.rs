//! Requeue and purge, as the command runs them: core's
//! [`Admin::requeue_dead_letters`](ezmq::Admin::requeue_dead_letters) and
//! [`Admin::purge`](ezmq::Admin::purge) with a progress bar on a terminal,
//! and their report printed.

use std::time::Duration;

use ezmq::{Client, DeadLetterSelection, DrainReport, MqClient, Topic};
use indicatif::{ProgressBar, ProgressStyle};

use crate::exit::{CliError, CliResult, Context};
use crate::table::{print_json, print_text};

/// Prints `report`.
pub(crate) fn print(report: &DrainReport, json: bool, dead: &Topic) -> CliResult<()> {
    if json {
        return print_json(report);
    }
    let verb = if report.action == "purge" {
        "deleted"
    } else {
        "requeued"
    };
    let mut text = format!("{verb} {} dead letters of {dead}", report.done);
    if report.left > 0 {
        text.push_str(&format!(", {} left in place", report.left));
    }
    text.push('\n');
    for id in &report.not_found {
        text.push_str(&format!("not found: {id}\n"));
    }
    for err in &report.errors {
        text.push_str(&format!("error: {err}\n"));
    }
    print_text(&text)
}

/// Fails (exit code 1) when something was not done.
pub(crate) fn check(report: &DrainReport) -> CliResult<()> {
    if report.is_complete() {
        Ok(())
    } else {
        Err(CliError::Incomplete(format!(
            "{} ids not found, {} errors",
            report.not_found.len(),
            report.errors.len()
        )))
    }
}

/// Pushes the selected dead letters of `dead` back on their topics.
pub(crate) async fn requeue(
    client: &Client,
    dead: &Topic,
    selection: DeadLetterSelection,
) -> CliResult<DrainReport> {
    let bar = progress(client, dead, "requeueing").await;
    let report = client
        .admin()
        .requeue_dead_letters(dead, selection, |n| bar.set_position(n))
        .await
        .context(|| format!("requeueing the dead letters in {dead:?}"));
    bar.finish_and_clear();
    report
}

/// Deletes every dead letter of `dead`.
pub(crate) async fn purge(client: &Client, dead: &Topic) -> CliResult<DrainReport> {
    let bar = progress(client, dead, "purging").await;
    let report = client
        .admin()
        .purge(dead, |n| bar.set_position(n))
        .await
        .context(|| format!("deleting dead letters of {dead:?}"));
    bar.finish_and_clear();
    report
}

/// A progress bar on stderr when it is a terminal (its length the
/// topic's length when the backend can tell), hidden otherwise.
async fn progress(client: &Client, dead: &Topic, what: &'static str) -> ProgressBar {
    if !crate::term::stderr_is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match client.queue_len(dead.as_str()).await {
        Ok(len) => ProgressBar::new(len).with_style(
            ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} (eta {eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        ),
        Err(_) => ProgressBar::new_spinner(),
    };
    bar.set_message(what);
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}
