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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_leaves_the_live_view_within_the_bound() {
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
