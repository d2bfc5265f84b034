//! A process killed with SIGKILL leaves `ezmq listeners` and `ezmq cron
//! list` within the stated bound ([`PRESENCE_EXPIRY`], 15 s), on the
//! embedded server (or the real nodes in `EZMQ_TEST_DISQUE_ADDRS`).
//!
//! The process is this test binary run again (the same test, with
//! `EZMQ_PRESENCE_CHILD_URL` set): it runs a listener and a crontab, says
//! `ready`, and waits to be killed.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ezmq::prelude::*;
use ezmq::presence::PRESENCE_EXPIRY;
use ezmq::Job;
use ezmq_test_support::{eventually, KillOnDrop, TestBroker};
use support::{disque_url, ezmq};

const TEST_NAME: &str = "a_killed_process_leaves_the_live_view_within_the_bound";
const CHILD_URL: &str = "EZMQ_PRESENCE_CHILD_URL";
const CHILD_NAME: &str = "EZMQ_PRESENCE_CHILD_NAME";
const READY: &str = "ezmq-presence-ready";
/// Set in a child's environment: run a crontab whose runs never end.
const CHILD_HOLDS: &str = "EZMQ_PRESENCE_CHILD_HOLDS";
const HOLD_TEST: &str = "a_killed_process_s_run_claim_is_taken_over";
/// What a holding child prints when a run starts.
const RUNNING: &str = "ezmq-run-started";

async fn run_child(url: String, name: String) {
    let client = ezmq::connect_url(&url).await.expect("the child connects");
    client
        .add_consume_listener(&name, |_job: Job| async { Ok::<(), std::io::Error>(()) })
        .await
        .expect("the child's listener");
    client
        .add_crontab(
            &name,
            "0 0 * * * *",
            |_tick: chrono::DateTime<chrono::Utc>| async { Ok::<(), std::io::Error>(()) },
        )
        .await
        .expect("the child's crontab");
    println!("{READY}");
    std::future::pending::<()>().await;
}

/// True when `ezmq listeners` shows the listener and the crontab named
/// `name` in process `pid`: `(listener, crontab)`.
async fn shown(url: &str, name: &str, pid: u32) -> (bool, bool) {
    let rows = ezmq(url, &["--json", "listeners"]).await.ok().json();
    let has = |kind: &str| {
        rows.as_array().is_some_and(|rows| {
            rows.iter().any(|r| {
                r["kind"] == kind
                    && r["name"] == name
                    && r["process"]
                        .as_str()
                        .is_some_and(|p| p.ends_with(&format!("/{pid}")))
            })
        })
    };
    (has("listener"), has("crontab"))
}

async fn cron_listed(url: &str, name: &str) -> bool {
    let all = ezmq(url, &["--json", "cron", "list"]).await.ok().json();
    all.as_array()
        .is_some_and(|all| all.iter().any(|c| c["name"] == name))
}

/// A child whose crontab's runs never end: the first run it wins holds
/// the run claim until the process dies.
async fn run_holding_child(url: String, name: String) {
    let client = ezmq::connect_url(&url).await.expect("the child connects");
    client
        .add_crontab(
            &name,
            "* * * * * *",
            |_tick: chrono::DateTime<chrono::Utc>| async {
                println!("{RUNNING}");
                std::future::pending::<()>().await;
                Ok::<(), std::io::Error>(())
            },
        )
        .await
        .expect("the child's crontab");
    std::future::pending::<()>().await;
}

/// Starts this binary as a child running `test` with `env`; returns it
/// and a channel of its stdout lines.
fn spawn_child(
    test: &str,
    env: &[(&str, &str)],
) -> (KillOnDrop, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = KillOnDrop(command.spawn().expect("start the child process"));
    let stdout = child.0.stdout.take().expect("the child's stdout");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Waits for a line of the child containing `what`.
async fn line_with(lines: &mut tokio::sync::mpsc::UnboundedReceiver<String>, what: &str) {
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.recv().await {
            if line.contains(what) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "the child printed {what:?} within 60 s");
}

/// A process killed mid-run leaves its crontab's run claim behind (nobody
/// gives it back); another process of the crontab takes it over once
/// presence says the holder is gone (the holder's tick older than 15 s,
/// its process gone for 15 s), instead of skipping ticks until `max_run`
/// (1 h) ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_s_run_claim_is_taken_over() {
    if let (Ok(url), Ok(name), Ok(_)) = (
        std::env::var(CHILD_URL),
        std::env::var(CHILD_NAME),
        std::env::var(CHILD_HOLDS),
    ) {
        run_holding_child(url, name).await;
        return;
    }
    if std::env::var(CHILD_URL).is_ok() {
        return;
    }
    let broker = TestBroker::start().await;
    let url = disque_url(&broker);
    let name = support::topic("held");
    let (mut child, mut lines) = spawn_child(
        HOLD_TEST,
        &[(CHILD_URL, &url), (CHILD_NAME, &name), (CHILD_HOLDS, "1")],
    );
    line_with(&mut lines, RUNNING).await;

    // Another process's participant: its ticks are skipped while the run
    // claim is held...
    let client = ezmq::connect_url(&url).await.expect("connect");
    let mut ran = support::every_second(&client, &name).await;
    let early = tokio::time::timeout(Duration::from_secs(3), ran.recv()).await;
    assert!(
        early.is_err(),
        "a tick ran while the run claim was held: {early:?}"
    );

    // ... and run again once the holder is killed and seen gone.
    child.0.kill().expect("SIGKILL the child");
    child.0.wait().expect("reap the child");
    let killed = Instant::now();
    let bound = PRESENCE_EXPIRY * 2 + Duration::from_secs(10);
    let tick = tokio::time::timeout(bound, ran.recv()).await;
    assert!(
        matches!(tick, Ok(Some(_))),
        "no tick ran within {bound:?} of the holder's kill"
    );
    println!(
        "a tick ran {:?} after the holder was killed",
        killed.elapsed()
    );
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_leaves_the_live_view_within_the_bound() {
    if std::env::var(CHILD_HOLDS).is_ok() {
        return;
    }
    if let (Ok(url), Ok(name)) = (std::env::var(CHILD_URL), std::env::var(CHILD_NAME)) {
        run_child(url, name).await;
        return;
    }
    let broker = TestBroker::start().await;
    let url = disque_url(&broker);
    let name = support::topic("killed");
    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().expect("the test binary"))
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_URL, &url)
            .env(CHILD_NAME, &name)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the child process"),
    );
    let pid = child.0.id();
    let stdout = child.0.stdout.take().expect("the child's stdout");
    let ready = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains(READY))
    });
    let ready = tokio::time::timeout(Duration::from_secs(60), ready)
        .await
        .expect("the child ready within 60 s")
        .expect("the reader");
    assert!(ready, "the child exited before it was ready");

    let seen = eventually(Duration::from_secs(15), || async {
        shown(&url, &name, pid).await == (true, true) && cron_listed(&url, &name).await
    })
    .await;
    let out = ezmq(&url, &["listeners"]).await.ok();
    assert!(
        seen,
        "the child's listener and crontab in the live view:\n{}",
        out.stdout
    );

    child.0.kill().expect("SIGKILL the child");
    child.0.wait().expect("reap the child");
    let killed = Instant::now();
    let bound = PRESENCE_EXPIRY + Duration::from_secs(5);
    let gone = eventually(bound, || async {
        shown(&url, &name, pid).await == (false, false) && !cron_listed(&url, &name).await
    })
    .await;
    let out = ezmq(&url, &["listeners"]).await.ok();
    assert!(
        gone,
        "still shown {:?} after the kill (bound {bound:?}):\n{}",
        killed.elapsed(),
        out.stdout
    );
}
