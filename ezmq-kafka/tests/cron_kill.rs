//! Distributed cron on the claim log across three processes, one of
//! them killed with SIGKILL while ticks run: no tick runs twice, and the
//! survivors go on running every tick (a tick the killed process had
//! just won is the only one that may not run).
//!
//! The participants are this test binary run again as child processes
//! (the same test, with `EZMQ_CRON_KAFKA_NAME` set); each prints
//! `ezmq-tick <unix secs> <pid>` for every tick it runs.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, Utc};
use ezmq_crontab::{CrontabExt, CrontabOptions};
use ezmq_kafka::KafkaConfig;
use ezmq_test_support::KillOnDrop;
use tokio::sync::mpsc;

/// The test's own name, which the children run.
const TEST_NAME: &str = "cron_runs_each_tick_once_across_three_processes_one_killed";
/// Set in a child's environment: the crontab's name and the prefix.
const CHILD_NAME: &str = "EZMQ_CRON_KAFKA_NAME";
const CHILD_PREFIX: &str = "EZMQ_CRON_KAFKA_PREFIX";
/// What a child prints for a tick it ran.
const TICK: &str = "ezmq-tick ";
/// Distinct ticks seen before the kill, and after it.
const TICKS_BEFORE: usize = 5;
const TICKS_AFTER: usize = 8;

fn config(prefix: &str) -> KafkaConfig {
    KafkaConfig::new(support::url())
        .with_prefix(prefix)
        .with_partitions(1)
        .with_connect_timeout(Duration::from_secs(3))
}

/// A child: runs the crontab every second, printing its ticks, until
/// it is killed.
async fn run_child(name: String, prefix: String) {
    ezmq_test_support::init_tracing();
    let client = ezmq_kafka::connect(config(&prefix))
        .await
        .expect("the child connects");
    let pid = std::process::id();
    // Overlap allowed: this checks the ticks' claims. With the default
    // overlap policy a process killed between a run and its run claim's
    // give-back holds that claim until presence sees it gone (about 15 s;
    // ezmq-cli/tests/presence_kill.rs), and the ticks until then are
    // skipped.
    client
        .add_crontab_with(
            &name,
            "* * * * * *",
            CrontabOptions::default().with_allow_overlap(true),
            move |tick: DateTime<Utc>| async move {
                println!("{TICK}{} {pid}", tick.timestamp());
                Ok::<(), std::convert::Infallible>(())
            },
        )
        .await
        .expect("the child's crontab");
    std::future::pending::<()>().await;
}

fn spawn_child(name: &str, prefix: &str, lines: &mpsc::UnboundedSender<String>) -> KillOnDrop {
    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().expect("the test binary"))
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_NAME, name)
            .env(CHILD_PREFIX, prefix)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a participant process"),
    );
    let stdout = child.0.stdout.take().expect("the child's stdout");
    let lines = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    child
}

/// Records the next tick line: `(tick, pid)`.
async fn next_tick(lines: &mut mpsc::UnboundedReceiver<String>) -> (i64, u32) {
    loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.recv())
            .await
            .expect("a tick within 30 s")
            .expect("the participants are running");
        if !line.contains(TICK) && !line.trim().is_empty() {
            eprintln!("participant: {line}");
        }
        // The first one follows libtest's "test NAME ... " on its line.
        if let Some(at) = line.find(TICK) {
            let mut parts = line[at + TICK.len()..].split_whitespace();
            let tick = parts.next().and_then(|t| t.parse().ok()).expect("a tick");
            let pid = parts.next().and_then(|p| p.parse().ok()).expect("a pid");
            return (tick, pid);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_runs_each_tick_once_across_three_processes_one_killed() {
    if let (Ok(name), Ok(prefix)) = (std::env::var(CHILD_NAME), std::env::var(CHILD_PREFIX)) {
        run_child(name, prefix).await;
        return;
    }
    let prefix = support::prefix();
    let Some(probe) = support::backend(config(&prefix)).await else {
        return;
    };
    let name = format!("cron-kill-{}", uuid::Uuid::new_v4().simple());
    let (tx, mut lines) = mpsc::unbounded_channel();
    let mut children: Vec<KillOnDrop> = (0..3).map(|_| spawn_child(&name, &prefix, &tx)).collect();
    let pids: Vec<u32> = children.iter().map(|c| c.0.id()).collect();

    let mut runs: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
    while runs.len() < TICKS_BEFORE {
        let (tick, pid) = next_tick(&mut lines).await;
        runs.entry(tick).or_default().push(pid);
    }
    // Kill the process that ran the newest tick: it is the likeliest to
    // hold a claim right now.
    let newest = runs.values().next_back().and_then(|w| w.first()).copied();
    let victim = pids.iter().position(|p| Some(*p) == newest).unwrap_or(0);
    children[victim].0.kill().expect("kill -9 a participant");
    children[victim]
        .0
        .wait()
        .expect("the killed process is reaped");
    let killed_pid = pids[victim];
    let killed_after = *runs.keys().next_back().expect("a tick");

    while runs.keys().filter(|t| **t > killed_after).count() < TICKS_AFTER {
        let (tick, pid) = next_tick(&mut lines).await;
        runs.entry(tick).or_default().push(pid);
    }
    drop(children);

    for (tick, who) in &runs {
        assert_eq!(who.len(), 1, "tick {tick} ran {} times: {who:?}", who.len());
    }
    for (tick, who) in runs.range(killed_after + 1..) {
        assert_ne!(who[0], killed_pid, "tick {tick} ran in the killed process");
    }
    let (first, last) = (
        *runs.keys().next().expect("ticks"),
        *runs.keys().next_back().expect("ticks"),
    );
    let missed: Vec<i64> = (first..=last).filter(|t| !runs.contains_key(t)).collect();
    assert!(
        missed.len() <= 1,
        "ticks missed (only one the killed process won may be): {missed:?}"
    );
    println!(
        "{} ticks across 3 processes, each once; missed around the kill: {missed:?}",
        runs.len()
    );
    support::close_and_clean(&[&probe], &prefix).await;
}
