//! The dashboard in a real browser: Debian's headless Chromium driven by
//! `playwright-core` (`tests/browser/check.mjs`) against the dashboard
//! served over TCP, on the embedded server, Redis and RabbitMQ (those two
//! skipped when they do not answer, unless required). Screenshots of each
//! page go to `target/dashboard-screenshots/<backend>/`.
//!
//! Needs `/usr/bin/chromium` (or `EZMQ_CHROMIUM`), `node`, and
//! `npm ci --prefix ezmq-dashboard/tests/browser`; without them the test
//! prints one skip line, unless `EZMQ_REQUIRE_BROKERS` names `chromium`
//! (as `.ci/run` does, after installing them).

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use ezmq::prelude::*;
use ezmq::spi::Capability;
use ezmq::{Client, ConsumeOptions, Job};
use ezmq_dashboard::{router, DashboardOptions};
use ezmq_test_support::{broker_required, unique_topic, TestBroker};

/// What is missing to run a browser, if anything.
fn missing(chromium: &Path, script_dir: &Path) -> Option<String> {
    if !chromium.exists() {
        return Some(format!("no chromium at {}", chromium.display()));
    }
    if std::process::Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .map_or(true, |s| !s.success())
    {
        return Some("no node".to_owned());
    }
    if !script_dir.join("node_modules/playwright-core").exists() {
        return Some(format!(
            "no playwright-core (npm ci --prefix {})",
            script_dir.display()
        ));
    }
    None
}

/// Where the browser can run: the Chromium binary and the script's
/// directory; `None` after the skip line.
fn browser() -> Option<(PathBuf, PathBuf)> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let script_dir = manifest.join("tests/browser");
    let chromium = std::env::var_os("EZMQ_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    if let Some(why) = missing(&chromium, &script_dir) {
        assert!(
            !broker_required("chromium"),
            "EZMQ_REQUIRE_BROKERS names chromium, but: {why}"
        );
        println!("skipped: {why}");
        return None;
    }
    Some((chromium, script_dir))
}

/// One browser at a time: the three tests share two cores.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Fills a topic on `client`'s broker, serves the dashboard and runs the
/// browser check against it.
async fn drive(client: Client, chromium: &Path, script_dir: &Path) {
    let _one = ONE_BROWSER.lock().await;
    let backend = client.backend_name();
    let lists = client.capabilities().has(Capability::Peek);
    let topic = unique_topic("browser");
    support::fill(&client, &topic).await;
    // Something for the cron and processes pages.
    let emails = unique_topic("emails");
    client
        .add_consume_listener_with(
            &emails,
            ConsumeOptions::new().with_concurrency(4),
            |_job: Job| async { Ok::<(), std::io::Error>(()) },
        )
        .await
        .expect("listener");
    client
        .add_crontab(
            &unique_topic("report"),
            "0 0 3 * * *",
            |_tick: chrono::DateTime<chrono::Utc>| async { Ok::<(), std::io::Error>(()) },
        )
        .await
        .expect("crontab");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = router(client.clone(), DashboardOptions::new());
    let server = tokio::spawn(async move {
        ezmq_dashboard::axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });

    let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/dashboard-screenshots")
        .join(backend);
    std::fs::create_dir_all(&shots).expect("the screenshot directory");
    let run = tokio::process::Command::new("node")
        .arg(script_dir.join("check.mjs"))
        .args([base.as_str(), topic.as_str()])
        .arg(&shots)
        .arg(if lists { "yes" } else { "no" })
        .env("EZMQ_CHROMIUM", chromium)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the browser check finishes within 120 s")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the browser check failed on {backend}:\n{stdout}\n{stderr}"
    );
    println!("{backend}: {stdout}screenshots in {}", shots.display());

    let _ = stop.send(());
    server.await.expect("the server task").expect("the server");
    support::drain(&client, &topic).await;
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_requeues_a_dead_letter_in_chromium_on_disque() {
    let Some((chromium, script_dir)) = browser() else {
        return;
    };
    let broker = TestBroker::start().await;
    drive(support::disque(&broker).await, &chromium, &script_dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_requeues_a_dead_letter_in_chromium_on_redis() {
    let Some((chromium, script_dir)) = browser() else {
        return;
    };
    if let Some(client) = support::connect("redis", &ezmq_test_support::redis_url()).await {
        drive(client, &chromium, &script_dir).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_requeues_a_dead_letter_in_chromium_on_rabbitmq() {
    let Some((chromium, script_dir)) = browser() else {
        return;
    };
    if let Some(client) = support::connect("rabbitmq", &ezmq_test_support::amqp_url()).await {
        drive(client, &chromium, &script_dir).await;
    }
}
