//! `kill -9` of a consumer process mid-batch: every job it had not
//! finished (running, fetched, or never reached) is run by the survivor
//! once the killed member's session ends; nothing is lost.
//!
//! The consumer is this test binary run again as a child process (the
//! same test, with `EZMQ_KILLED_KAFKA_TOPIC` set): its handlers print
//! the job id when they start and when they finish; the parent kills it
//! with SIGKILL after a number of starts.

mod support;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ezmq_core::{Client, ConsumeOptions, Job, MqClient, MqClientExt};
use ezmq_test_support::{skip_or_require, KillOnDrop};
use tokio::sync::mpsc;

/// The test's own name, which the child process runs.
const TEST_NAME: &str = "a_killed_consumers_unfinished_jobs_run_on_the_survivor";
/// Set in the child's environment: the topic it consumes and the prefix.
const CHILD_TOPIC: &str = "EZMQ_KILLED_KAFKA_TOPIC";
const CHILD_PREFIX: &str = "EZMQ_KILLED_KAFKA_PREFIX";
/// What the child prints, followed by the job id.
const STARTED: &str = "ezmq-started ";
const FINISHED: &str = "ezmq-finished ";
/// The group session: a killed member's partitions move after it.
const SESSION: Duration = Duration::from_secs(3);
/// Jobs pushed, and starts in the child before it is killed.
const JOBS: usize = 400;
const STARTS_BEFORE_KILL: usize = 150;
/// Bound for what should happen at once.
const SOON: Duration = Duration::from_secs(60);

fn prefix() -> String {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX
        .get_or_init(|| std::env::var(CHILD_PREFIX).unwrap_or_else(|_| support::prefix()))
        .clone()
}

async fn connect() -> ezmq_core::Result<Client> {
    ezmq_kafka::connect(support::config(&prefix()).with_session_timeout(SESSION)).await
}

/// The child process: consumes at concurrency 16, each job taking
/// 20 ms, printing its starts and finishes, until it is killed.
async fn run_child(topic: String) {
    let client = connect().await.expect("the child connects");
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new().with_concurrency(16),
            |job: Job| async move {
                println!("{STARTED}{}", job.id());
                tokio::time::sleep(Duration::from_millis(20)).await;
                println!("{FINISHED}{}", job.id());
                Ok::<(), std::convert::Infallible>(())
            },
        )
        .await
        .expect("the child's listener");
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_consumers_unfinished_jobs_run_on_the_survivor() {
    if let Ok(topic) = std::env::var(CHILD_TOPIC) {
        run_child(topic).await;
        return;
    }
    let client = match connect().await {
        Ok(client) => client,
        Err(err) => {
            skip_or_require("kafka", &support::url(), &err);
            return;
        }
    };
    let topic = format!("killed.{}", uuid::Uuid::new_v4().simple());
    let bodies: Vec<(bytes::Bytes, ezmq_core::PushOptions)> = (0..JOBS)
        .map(|n| (format!("job {n}").into(), ezmq_core::PushOptions::new()))
        .collect();
    let pushed: HashSet<String> = client
        .push_batch(&topic, bodies)
        .await
        .expect("push the jobs")
        .into_iter()
        .map(|r| r.expect("each job stored").to_string())
        .collect();
    assert_eq!(pushed.len(), JOBS);

    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().expect("the test binary"))
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_TOPIC, &topic)
            .env(CHILD_PREFIX, prefix())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the consumer process"),
    );
    let stdout = child.0.stdout.take().expect("the child's stdout");
    let (lines_tx, mut lines) = mpsc::unbounded_channel::<String>();
    let reader = tokio::task::spawn_blocking(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut started = HashSet::new();
    let mut finished = HashSet::new();
    let deadline = Instant::now() + SOON;
    while started.len() < STARTS_BEFORE_KILL {
        let line = tokio::time::timeout_at(deadline.into(), lines.recv())
            .await
            .expect("the consumer process starts jobs in time")
            .expect("the consumer process is running");
        // The first one follows libtest's "test NAME ... " on its line.
        if let Some(at) = line.find(STARTED) {
            started.insert(line[at + STARTED.len()..].to_string());
        } else if let Some(at) = line.find(FINISHED) {
            finished.insert(line[at + FINISHED.len()..].to_string());
        }
    }
    child.0.kill().expect("kill -9 the consumer process");
    child.0.wait().expect("the killed process is reaped");
    let killed = Instant::now();
    // What the child printed before it died.
    let _ = reader.await;
    while let Ok(line) = lines.try_recv() {
        if let Some(at) = line.find(FINISHED) {
            finished.insert(line[at + FINISHED.len()..].to_string());
        }
    }

    let (tx, mut runs) = mpsc::unbounded_channel::<(String, u32)>();
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new().with_concurrency(16),
            move |job: Job| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send((job.id().to_string(), job.attempt()));
                    Ok::<(), std::convert::Infallible>(())
                }
            },
        )
        .await
        .expect("the survivor's listener");
    let must_run: HashSet<String> = pushed.difference(&finished).cloned().collect();
    let mut ran = HashSet::new();
    let mut again = 0;
    let mut counted = 0;
    let mut first_run = None;
    while !must_run.is_subset(&ran) {
        let (id, attempt) = tokio::time::timeout(SOON, runs.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{} unfinished jobs never ran on the survivor",
                    must_run.difference(&ran).count()
                )
            })
            .expect("the listener is running");
        first_run.get_or_insert_with(|| killed.elapsed());
        assert!(pushed.contains(&id), "an unknown job {id}");
        if finished.contains(&id) {
            again += 1;
        }
        if started.contains(&id) && !finished.contains(&id) && attempt >= 2 {
            counted += 1;
        }
        ran.insert(id);
    }
    eprintln!(
        "killed after {} starts ({} finished); the survivor's first job came {:?} after the kill (session {SESSION:?}); {} finished jobs ran again; {counted} of the {} unfinished started ones came back with their attempt counted (none on nisshi, which drops commit metadata)",
        started.len(),
        finished.len(),
        first_run.unwrap_or_default(),
        again,
        started.difference(&finished).count()
    );
    assert!(
        again <= 1_000,
        "at most the window of uncommitted records runs twice"
    );
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
