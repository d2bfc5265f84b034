//! The command itself: exit codes, `--help`, `stats --watch`, `serve`.

mod support;

use std::process::Stdio;
use std::time::Duration;

use ezmq_test_support::TestBroker;
use support::{disque_url, ezmq, ezmq_raw, topic, BIN};
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test]
async fn bad_url_no_url_and_unreachable_broker_have_their_exit_codes() {
    let out = ezmq("kafka://broker:9092", &["stats", "t"])
        .await
        .expect_code(2);
    assert!(out.stderr.contains("bad broker URL"), "{}", out.stderr);
    let out = ezmq_raw(&["stats", "t"]).await.expect_code(2);
    assert!(out.stderr.contains("EZMQ_URL"), "{}", out.stderr);
    let out = ezmq("disque://127.0.0.1:1", &["stats", "t"])
        .await
        .expect_code(3);
    assert!(out.stderr.contains("127.0.0.1:1"), "{}", out.stderr);
    ezmq("redis://127.0.0.1:1", &["stats", "t"])
        .await
        .expect_code(3);
    // A bad topic name is a usage error.
    let broker = TestBroker::start().await;
    ezmq(&disque_url(&broker), &["push", "bad topic", "x"])
        .await
        .expect_code(2);
}

#[tokio::test]
async fn help_documents_the_exit_codes() {
    let out = ezmq_raw(&["--help"]).await.ok();
    for needle in ["Exit codes", "unreachable", "capability", "EZMQ_URL"] {
        assert!(out.stdout.contains(needle), "{needle}:\n{}", out.stdout);
    }
}

/// Sends `signal` (`INT`, `TERM`) to `pid`.
async fn kill(pid: u32, signal: &str) {
    let status = tokio::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .await
        .expect("kill runs");
    assert!(status.success());
}

#[tokio::test]
async fn stats_watch_refreshes_until_ctrl_c() {
    let broker = TestBroker::start().await;
    let url = disque_url(&broker);
    let t = topic("watch");
    let mut child = tokio::process::Command::new(BIN)
        .args(["--url", &url, "--json", "stats", &t, "--watch", "100ms"])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines
        .next_line()
        .await
        .expect("read")
        .expect("a first frame");
    let first: serde_json::Value = serde_json::from_str(&first).expect("JSON");
    assert_eq!(first["topics"][0]["waiting"], 0, "{first}");
    ezmq(&url, &["push", &t, "x"]).await.ok();
    // The push shows up in a later frame.
    let mut seen = false;
    for _ in 0..100 {
        let line = lines.next_line().await.expect("read").expect("a frame");
        let frame: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        if frame["topics"][0]["waiting"] == 1 {
            seen = true;
            break;
        }
    }
    assert!(seen, "a later frame shows the pushed job");
    kill(child.id().expect("pid"), "INT").await;
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits after Ctrl-C")
        .expect("wait");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn stats_watch_redraws_a_table() {
    let broker = TestBroker::start().await;
    let url = disque_url(&broker);
    let t = topic("watch-table");
    let mut child = tokio::process::Command::new(BIN)
        .args(["--url", &url, "stats", &t, "--watch", "50ms"])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut clears = 0;
    while clears < 2 {
        let line = lines.next_line().await.expect("read").expect("output");
        if line.contains("\x1b[2J\x1b[H") {
            clears += 1;
        }
        if clears > 0 && line.starts_with(&t) {
            assert!(line.contains('0'), "{line}");
        }
    }
    kill(child.id().expect("pid"), "INT").await;
    let status = child.wait().await.expect("wait");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn serve_runs_the_embedded_server() {
    let mut child = tokio::process::Command::new(BIN)
        .args(["serve", "--port", "0", "--threads", "1"])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("ready in time")
        .expect("read")
        .expect("a ready line");
    let addr = ready
        .strip_prefix("ready on ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected first line {ready:?}"));
    let url = format!("disque://{addr}");
    let t = topic("serve");
    ezmq(&url, &["push", &t, "served"]).await.ok();
    let jobs = ezmq(&url, &["--json", "peek", &t]).await.ok().json();
    assert_eq!(jobs[0]["body"], "served");
    kill(child.id().expect("pid"), "TERM").await;
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("stops on SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status}");
}
