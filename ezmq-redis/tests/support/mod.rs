//! Shared helpers of the Redis integration tests.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::Duration;

use ezmq_core::{Client, ConsumeOptions, Job, MqClientExt};
use ezmq_redis::RedisConfig;
use ezmq_test_support::StallingProxy;
use tokio::sync::mpsc;

/// The Redis the tests use.
pub fn redis_url() -> String {
    std::env::var("EZMQ_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// Logs to the test output when `RUST_LOG` is set.
pub fn init_tracing() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    });
}

fn required() -> bool {
    std::env::var("EZMQ_REQUIRE_BROKERS").is_ok_and(|v| {
        v.split(',')
            .map(str::trim)
            .any(|b| b.eq_ignore_ascii_case("redis") || b.eq_ignore_ascii_case("all"))
    })
}

/// A test configuration on the shared Redis with short timings, or `None`
/// (after printing the skip line) when no Redis answers there — unless
/// `EZMQ_REQUIRE_BROKERS` names redis, then it panics.
pub async fn config() -> Option<RedisConfig> {
    init_tracing();
    let url = redis_url();
    let config = RedisConfig::new(url.clone())
        .with_connect_timeout(Duration::from_secs(2))
        .with_lease(Duration::from_secs(2))
        .with_reclaim_interval(Duration::from_millis(200));
    match ezmq_redis::RedisBackend::connect(config.clone()).await {
        Ok(_) => Some(config),
        Err(err) => {
            if required() {
                panic!("EZMQ_REQUIRE_BROKERS names redis but {url} does not answer: {err}");
            }
            println!("skipped: no broker at {url}");
            None
        }
    }
}

/// A client on `config`.
pub async fn client(config: &RedisConfig) -> Client {
    ezmq_redis::connect(config.clone())
        .await
        .expect("connect to Redis")
}

/// A topic name no other test uses.
pub fn topic(name: &str) -> String {
    format!("test.{name}.{}", uuid::Uuid::new_v4().simple())
}

pub use ezmq_test_support::free_port;

/// True when `redis-server` can be started.
pub fn have_redis_server() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// True when `redis-server` can be started; otherwise prints the skip
/// line. Installs the test tracing first.
pub fn can_start_redis_server() -> bool {
    init_tracing();
    if have_redis_server() {
        return true;
    }
    println!("skipped: no broker at redis-server (not installed)");
    false
}

/// A private `redis-server` on a free port ([`RedisProcess::start`] with
/// `extra`), or `None` after printing the skip line when it is not
/// installed.
pub async fn private_redis(extra: &[String]) -> Option<RedisProcess> {
    if !can_start_redis_server() {
        return None;
    }
    Some(RedisProcess::start(free_port(), extra).await)
}

/// A client of the shared Redis through a [`StallingProxy`] (command
/// timeout 1 s): `proxy.stall()` keeps connections open and answers
/// nothing, as with a stopped server process.
pub async fn behind_stalling_proxy(config: RedisConfig) -> (StallingProxy, Client) {
    let proxy = StallingProxy::in_front_of(&redis_url()).await;
    let mut config = config.with_command_timeout(Duration::from_secs(1));
    config.urls = vec![proxy.route(&redis_url())];
    let client = client(&config).await;
    (proxy, client)
}

/// A listener on `topic` (with `options`) that hands every job to the
/// test.
pub async fn forwarded_jobs(
    client: &Client,
    topic: &str,
    options: ConsumeOptions,
) -> mpsc::UnboundedReceiver<Job> {
    let (tx, rx) = mpsc::unbounded_channel();
    forward(client, topic, options, tx, |job| job).await;
    rx
}

/// A listener on `topic` (with `options`) that hands every body to the
/// test.
pub async fn forwarded_bodies(
    client: &Client,
    topic: &str,
    options: ConsumeOptions,
) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    forward(client, topic, options, tx, body_of).await;
    rx
}

/// A job's body as text.
pub fn body_of(job: Job) -> String {
    String::from_utf8_lossy(job.body()).into_owned()
}

/// Starts a listener on `topic` that succeeds and sends `what(job)` to
/// `to`.
pub async fn forward<T: Send + 'static>(
    client: &Client,
    topic: &str,
    options: ConsumeOptions,
    to: mpsc::UnboundedSender<T>,
    what: fn(Job) -> T,
) {
    client
        .add_consume_listener_with(topic, options, move |job: Job| {
            let to = to.clone();
            async move {
                let _ = to.send(what(job));
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .expect("start a listener");
}

/// A `redis-server` child process; killed on drop.
#[derive(Debug)]
pub struct RedisProcess {
    pub port: u16,
    args: Vec<String>,
    child: Option<Child>,
}

impl RedisProcess {
    /// Starts `redis-server --port <port> --save '' --appendonly no` plus
    /// `extra` and waits until it answers.
    pub async fn start(port: u16, extra: &[String]) -> RedisProcess {
        let mut args = vec![
            "--port".to_owned(),
            port.to_string(),
            "--bind".to_owned(),
            "127.0.0.1".to_owned(),
            "--save".to_owned(),
            String::new(),
            "--appendonly".to_owned(),
            "no".to_owned(),
        ];
        args.extend_from_slice(extra);
        let mut process = RedisProcess {
            port,
            args,
            child: None,
        };
        process.spawn().await;
        process
    }

    async fn spawn(&mut self) {
        self.spawn_child();
        wait_for_ping(self.port).await;
    }

    /// Starts the process, without waiting for it to answer.
    fn spawn_child(&mut self) {
        let child = Command::new("redis-server")
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
    }

    /// The URL of this server.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A configuration for this server: connect timeout 1 s, command
    /// timeout 2 s.
    pub fn config(&self) -> RedisConfig {
        RedisConfig::new(self.url())
            .with_connect_timeout(Duration::from_secs(1))
            .with_command_timeout(Duration::from_secs(2))
    }

    /// Kills the server.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }

    /// Starts it again on the same port (after [`RedisProcess::kill`]) and
    /// returns the moment its port accepted a TCP connection again
    /// (polled every 5 ms), once it also answers PING.
    pub async fn start_again(&mut self) -> tokio::time::Instant {
        self.kill();
        self.spawn_child();
        let addr = format!("127.0.0.1:{}", self.port);
        let mut accepted = None;
        for _ in 0..2000 {
            if tokio::net::TcpStream::connect(&addr).await.is_ok() {
                accepted = Some(tokio::time::Instant::now());
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let accepted = accepted.expect("redis-server accepts connections again within 10 s");
        wait_for_ping(self.port).await;
        accepted
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits (up to 10 s) until a server answers PING on `port` (a refusal
/// such as `NOAUTH` counts as an answer).
pub async fn wait_for_ping(port: u16) {
    let url = format!("redis://127.0.0.1:{port}");
    for _ in 0..200 {
        if let Ok(client) = redis::Client::open(url.as_str()) {
            if let Ok(mut conn) = client.get_multiplexed_async_connection().await {
                // Any answer will do: `NOAUTH` from a server with a password.
                match redis::cmd("PING").query_async::<String>(&mut conn).await {
                    Ok(_) => return,
                    Err(err) if err.code().is_some() => return,
                    Err(_) => {}
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("redis-server on port {port} did not start");
}

/// A fresh temporary directory.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ezmq-redis-{name}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).expect("create a temp dir");
    dir
}

/// Waits until `cond` holds, up to `limit`.
pub async fn eventually<F: FnMut() -> bool>(limit: Duration, mut cond: F) -> bool {
    let end = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < end {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}
