//! `kill -9` of a consumer process mid-job: its jobs stay leased while the
//! lease runs and are delivered again once it ends, each once, as a second
//! attempt.
//!
//! The consumer is this test binary run again as a child process (the
//! same test, with `EZMQ_KILLED_CONSUMER_TOPIC` set): it starts a listener
//! whose handlers print the job id and never finish, and the parent kills
//! it with SIGKILL once every job has started.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ezmq_core::{Client, ConsumeOptions, Job, MqClient, MqClientExt};
use ezmq_postgres::PostgresConfig;
use ezmq_test_support::{postgres_url as url, skip_or_require, KillOnDrop};
use tokio::sync::mpsc;

/// The test's own name, which the child process runs.
const TEST_NAME: &str = "a_killed_consumers_jobs_are_delivered_again_after_the_lease";
/// Set in the child's environment: the topic it consumes.
const CHILD_TOPIC: &str = "EZMQ_KILLED_CONSUMER_TOPIC";
/// What the child prints, followed by the job id, when a handler starts.
const STARTED: &str = "ezmq-started ";
/// The lease both processes use: short, so the test does not wait long.
const LEASE: Duration = Duration::from_secs(3);
/// Jobs the child holds when it is killed.
const JOBS: usize = 5;
/// Bound for what should happen at once.
const SOON: Duration = Duration::from_secs(30);
/// A check that nothing more arrives.
const QUIET: Duration = Duration::from_secs(1);

async fn connect() -> ezmq_core::Result<Client> {
    ezmq_postgres::connect(
        PostgresConfig::new(url())
            .with_schema("ezmq_test")
            .with_lease(LEASE),
    )
    .await
}

/// The child process: consumes the topic, prints each job's id as its
/// handler starts, and holds every job until it is killed.
async fn run_child(topic: String) {
    let client = connect().await.expect("the child connects");
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new().with_concurrency(JOBS),
            |job: Job| async move {
                println!("{STARTED}{}", job.id());
                std::future::pending::<()>().await;
                Ok::<(), std::convert::Infallible>(())
            },
        )
        .await
        .expect("the child's listener");
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_consumers_jobs_are_delivered_again_after_the_lease() {
    if let Ok(topic) = std::env::var(CHILD_TOPIC) {
        run_child(topic).await;
        return;
    }
    let client = match connect().await {
        Ok(client) => client,
        Err(err) => {
            skip_or_require("postgres", &url(), &err);
            return;
        }
    };
    let topic = format!("killed.{}", uuid::Uuid::new_v4().simple());
    let mut pushed = Vec::new();
    for n in 0..JOBS {
        let id = client
            .push(&topic, format!("job {n}").into())
            .await
            .expect("push");
        pushed.push(id.to_string());
    }
    pushed.sort();

    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().expect("the test binary"))
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_TOPIC, &topic)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the consumer process"),
    );
    let stdout = child.0.stdout.take().expect("the child's stdout");
    let reader = tokio::task::spawn_blocking(move || {
        let mut started = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // The first one follows libtest's "test NAME ... " on its line.
            if let Some(at) = line.find(STARTED) {
                started.push(line[at + STARTED.len()..].to_string());
                if started.len() == JOBS {
                    break;
                }
            }
        }
        started
    });
    let mut started = tokio::time::timeout(SOON, reader)
        .await
        .expect("the consumer process starts every job in time")
        .expect("reading the child's output");
    started.sort();
    assert_eq!(started, pushed, "the consumer process held every job");

    child.0.kill().expect("kill -9 the consumer process");
    child.0.wait().expect("the killed process is reaped");
    let killed = Instant::now();

    let (tx, mut again) = mpsc::unbounded_channel::<(String, u32)>();
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new().with_concurrency(JOBS),
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
    let mut redelivered = Vec::new();
    while redelivered.len() < JOBS {
        let (id, attempt) = tokio::time::timeout(SOON, again.recv())
            .await
            .expect("every held job is delivered again after the lease")
            .expect("the listener is running");
        assert_eq!(attempt, 2, "job {id} comes back as its second attempt");
        redelivered.push(id);
    }
    let waited = killed.elapsed();
    redelivered.sort();
    assert_eq!(redelivered, pushed, "each held job is delivered again");
    assert!(
        tokio::time::timeout(QUIET, again.recv()).await.is_err(),
        "no job is delivered a third time"
    );
    eprintln!("delivered again {waited:?} after the kill (lease {LEASE:?})");
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
