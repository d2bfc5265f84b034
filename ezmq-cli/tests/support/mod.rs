//! Shared helpers: run the built `ezmq` binary, reach each test broker.
#![allow(dead_code, unreachable_pub)]

pub mod cases;
pub mod flow_cases;

use std::process::Stdio;
use std::time::Duration;

use ezmq::MqClient;
use ezmq_test_support::{amqp_url, redis_url, skip_or_require, TestBroker};

/// The built binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_ezmq");

/// What one run of the binary did.
#[derive(Debug)]
pub struct Out {
    /// The exit code (`-1` when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Out {
    /// Panics with both streams unless the exit code is `code`.
    pub fn expect_code(self, code: i32) -> Self {
        assert_eq!(
            self.code, code,
            "exit code {} (want {code})\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }

    /// Panics unless the run succeeded.
    pub fn ok(self) -> Self {
        self.expect_code(0)
    }

    /// Stdout as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

/// Runs `ezmq --url URL ARGS...` (no `EZMQ_URL` from the environment,
/// stdin closed).
pub async fn ezmq(url: &str, args: &[&str]) -> Out {
    let mut all = vec!["--url", url];
    all.extend_from_slice(args);
    ezmq_raw(&all).await
}

/// Runs `ezmq --url URL ARGS...` logging everything (`RUST_LOG=trace`)
/// to stderr.
pub async fn ezmq_traced(url: &str, args: &[&str]) -> Out {
    let mut all = vec!["--url", url];
    all.extend_from_slice(args);
    run(&all, Some("trace")).await
}

/// Runs `ezmq --url URL ARGS...` with these environment variables set
/// (`RUST_LOG` among them, else unset).
pub async fn ezmq_env(url: &str, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut all = vec!["--url", url];
    all.extend_from_slice(args);
    let rust_log = env.iter().find(|(k, _)| *k == "RUST_LOG").map(|(_, v)| *v);
    run_with(&all, rust_log, env).await
}

/// Runs `ezmq ARGS...` as given.
pub async fn ezmq_raw(args: &[&str]) -> Out {
    run(args, None).await
}

async fn run(args: &[&str], rust_log: Option<&str>) -> Out {
    run_with(args, rust_log, &[]).await
}

async fn run_with(args: &[&str], rust_log: Option<&str>, env: &[(&str, &str)]) -> Out {
    let mut command = tokio::process::Command::new(BIN);
    match rust_log {
        Some(filter) => command.env("RUST_LOG", filter),
        None => command.env_remove("RUST_LOG"),
    };
    // Whatever the test runner's own environment says about colour.
    command.env_remove("NO_COLOR");
    command.envs(env.iter().copied());
    let output = command
        .args(args)
        .env_remove("EZMQ_URL")
        .stdin(Stdio::null())
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), output)
        .await
        .unwrap_or_else(|_| panic!("ezmq {args:?} did not finish in 60 s"))
        .expect("the ezmq binary runs");
    Out {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The `disque://` URL of a test broker (embedded unless
/// `EZMQ_TEST_DISQUE_ADDRS` names real nodes).
pub fn disque_url(broker: &TestBroker) -> String {
    format!("disque://{}", broker.addrs().join(","))
}

/// The shared Redis's URL, or `None` after the skip line.
pub async fn redis() -> Option<String> {
    reachable("redis", redis_url()).await
}

/// The shared RabbitMQ's URL, or `None` after the skip line.
pub async fn rabbitmq() -> Option<String> {
    reachable("rabbitmq", amqp_url()).await
}

async fn reachable(backend: &str, url: String) -> Option<String> {
    let connect = tokio::time::timeout(Duration::from_secs(10), ezmq::connect_url(&url)).await;
    match connect {
        Ok(Ok(client)) => {
            let _ = client.shutdown(Duration::from_secs(1)).await;
            Some(url)
        }
        Ok(Err(err)) => {
            skip_or_require(backend, &url, &err);
            None
        }
        Err(_) => {
            skip_or_require(backend, &url, &"no answer within 10 s");
            None
        }
    }
}

/// A unique topic name.
pub fn topic(what: &str) -> String {
    ezmq_test_support::unique_topic(&format!("cli-{what}"))
}

/// Adds crontab `name` running every second on `client`; each tick it ran
/// comes on the returned channel.
pub async fn every_second(
    client: &ezmq::Client,
    name: &str,
) -> tokio::sync::mpsc::UnboundedReceiver<chrono::DateTime<chrono::Utc>> {
    use ezmq::prelude::*;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    client
        .add_crontab(
            name,
            "* * * * * *",
            move |tick: chrono::DateTime<chrono::Utc>| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(tick);
                    Ok::<(), std::io::Error>(())
                }
            },
        )
        .await
        .expect("crontab");
    rx
}
