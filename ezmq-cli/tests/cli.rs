//! The command itself: exit codes, `--help`, `stats --watch`, `serve`.

mod support;

use std::process::Stdio;
use std::time::Duration;

use ezmq_test_support::TestBroker;
use support::{disque_url, ezmq, ezmq_env, ezmq_raw, topic, BIN};
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
    // Piped: one plain frame after another, no screen-clearing codes.
    let mut frames = 0;
    while frames < 2 {
        let line = lines.next_line().await.expect("read").expect("output");
        assert!(
            !line.contains('\x1b'),
            "a control code in piped output: {line:?}"
        );
        if line.contains("; Ctrl-C to stop") {
            frames += 1;
        }
        if frames > 0 && line.starts_with(&t) {
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

/// Panics when `text` (`what` of `ezmq ARGS`) holds an ESC byte: colour or
/// cursor codes in output that is not a terminal.
fn assert_plain(what: &str, text: &str) {
    assert!(
        !text.contains('\x1b'),
        "{what} is piped but has control codes:\n{text:?}"
    );
}

#[tokio::test]
async fn piped_output_and_logs_have_no_colour_codes() {
    let broker = TestBroker::start().await;
    let url = disque_url(&broker);
    let t = topic("plain");
    ezmq(&url, &["push", &t, "x"]).await.ok();
    for env in [
        &[("RUST_LOG", "info")][..],
        &[("RUST_LOG", "trace"), ("NO_COLOR", "1")][..],
    ] {
        for args in [&["stats", t.as_str()][..], &["peek", t.as_str()][..]] {
            let out = ezmq_env(&url, args, env).await.ok();
            assert!(!out.stderr.is_empty(), "{env:?} logs something");
            assert_plain("stdout", &out.stdout);
            assert_plain("stderr", &out.stderr);
        }
    }
}

/// A requeue of 300 dead letters (long enough for a progress bar on a
/// terminal) writes no bar and no colour into pipes.
#[tokio::test]
async fn a_long_requeue_stays_plain_when_piped() {
    use ezmq::{ConsumeOptions, Job, MqClient, MqClientExt};
    const JOBS: usize = 300;
    let broker = TestBroker::start().await;
    let url = disque_url(&broker);
    let t = topic("requeue-many");
    let dead = format!("{t}.dead-letter");
    let client = ezmq::connect_url(&url).await.expect("connect");
    let failing = client
        .add_consume_listener_with(
            &t,
            ConsumeOptions::new().with_max_attempts(1),
            |_job: Job| async { Err::<(), _>(std::io::Error::other("boom")) },
        )
        .await
        .expect("listener");
    for i in 0..JOBS {
        client
            .push(&t, format!("job {i}").into())
            .await
            .expect("push");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while client.queue_len(&dead).await.expect("qlen") < JOBS as u64 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{JOBS} dead letters in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    failing.stop(Duration::from_secs(5)).await;
    let out = ezmq_env(
        &url,
        &["dead-letters", &t, "--requeue", "--all"],
        &[("RUST_LOG", "info")],
    )
    .await
    .ok();
    assert!(
        out.stdout
            .contains(&format!("requeued {JOBS} dead letters")),
        "{}",
        out.stdout
    );
    assert_plain("stdout", &out.stdout);
    assert_plain("stderr", &out.stderr);
    assert_eq!(client.queue_len(&t).await.expect("qlen"), JOBS as u64);
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

/// Runs `command` (a shell line) on a pseudo-terminal with util-linux
/// `script`, returning what the terminal showed; `None` where `script`
/// is missing or is not util-linux's.
async fn on_a_terminal(command: &str, env: &[(&str, &str)]) -> Option<String> {
    let probe = tokio::process::Command::new("script")
        .args(["-qec", "true", "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .await;
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no util-linux `script` to run the CLI on a terminal");
        return None;
    }
    let mut script = tokio::process::Command::new("script");
    script
        .args(["-qec", command, "/dev/null"])
        .env_remove("NO_COLOR")
        .env_remove("EZMQ_URL")
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    let out = tokio::time::timeout(Duration::from_secs(60), script.output())
        .await
        .expect("script finishes in 60 s")
        .expect("script runs");
    assert!(out.status.success(), "{command}: {out:?}");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test]
async fn a_terminal_gets_colour_unless_no_color_is_set() {
    let broker = TestBroker::start().await;
    let t = topic("tty");
    let command = format!("{BIN} --url {} stats {t}", disque_url(&broker));
    let Some(coloured) = on_a_terminal(&command, &[("RUST_LOG", "info")]).await else {
        return;
    };
    assert!(
        coloured.contains("\x1b["),
        "no colour on a terminal:\n{coloured:?}"
    );
    let plain = on_a_terminal(&command, &[("RUST_LOG", "info"), ("NO_COLOR", "1")])
        .await
        .unwrap_or_default();
    assert!(plain.contains(" INFO "), "{plain:?}");
    assert_plain("a NO_COLOR terminal", &plain);
}
