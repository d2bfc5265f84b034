//! Private NATS servers for the tests that kill or restart one: a single
//! server, or a three-node JetStream cluster with routes, each node on
//! free loopback ports with a store directory of its own.
//!
//! Each `nats-server` runs under a small shell watcher that kills it when
//! the test process is gone, and then deletes its store, so a server
//! shared by a test binary's tests (a `static`) never outlives it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One `nats-server` process (under its watcher), killed on drop.
#[derive(Debug)]
pub(crate) struct NatsNode {
    pub(crate) name: String,
    pub(crate) port: u16,
    args: Vec<String>,
    store: PathBuf,
    child: Mutex<Option<Child>>,
}

/// The path of `nats-server`, `None` (after a skip line) when it is not
/// installed.
fn server_bin() -> Option<&'static str> {
    let found = Command::new("nats-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        Some("nats-server")
    } else if ezmq_test_support::broker_required("nats") {
        panic!("EZMQ_REQUIRE_BROKERS names nats but nats-server is not installed");
    } else {
        println!("skipped: nats-server is not installed");
        None
    }
}

pub(crate) use ezmq_test_support::free_port;

impl NatsNode {
    fn new(name: &str, port: u16, extra: Vec<String>) -> Self {
        let store =
            std::env::temp_dir().join(format!("ezmq-nats-{}", uuid::Uuid::new_v4().simple()));
        let mut args = vec![
            "-a".to_owned(),
            "127.0.0.1".to_owned(),
            "-p".to_owned(),
            port.to_string(),
            "-js".to_owned(),
            "-sd".to_owned(),
            store.display().to_string(),
            "-n".to_owned(),
            name.to_owned(),
        ];
        args.extend(extra);
        NatsNode {
            name: name.to_owned(),
            port,
            args,
            store,
            child: Mutex::new(None),
        }
    }

    /// Starts the process (again, with the same store) and waits for its
    /// client port.
    pub(crate) fn start(&self) -> Result<(), String> {
        let mut child = self.child.lock().unwrap();
        if child.is_some() {
            return Ok(());
        }
        let script = format!(
            "nats-server \"$@\" >{log} 2>&1 & s=$!; \
             while kill -0 {parent} 2>/dev/null && kill -0 $s 2>/dev/null; do sleep 0.2; done; \
             kill -9 $s 2>/dev/null; \
             if ! kill -0 {parent} 2>/dev/null; then rm -rf {store} {log}; fi",
            store = self.store.display(),
            log = self.store.with_extension("log").display(),
            parent = std::process::id(),
        );
        let spawned = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .args(&self.args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting nats-server: {e}"))?;
        *child = Some(spawned);
        drop(child);
        self.wait_open(Duration::from_secs(20))
    }

    /// Waits for the client port; fails at once, with the end of the
    /// server's log, when the server exits first (a port taken meanwhile
    /// by another process, say).
    fn wait_open(&self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if port_open(self.port) {
                return Ok(());
            }
            let exited = match self.child.lock().unwrap().as_mut() {
                Some(watcher) => watcher.try_wait().ok().flatten().is_some(),
                None => true,
            };
            if exited {
                self.child.lock().unwrap().take();
                return Err(format!(
                    "nats-server {} exited before opening 127.0.0.1:{}: {}",
                    self.name,
                    self.port,
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "nats-server {} did not open 127.0.0.1:{} within {within:?}: {}",
            self.name,
            self.port,
            self.log_tail()
        ))
    }

    /// The last lines of the server's log, for a failure message.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.store.with_extension("log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }

    /// Kills the server as a crash would (SIGKILL through its watcher,
    /// which kills it when it is killed itself).
    pub(crate) fn kill(&self) {
        if let Some(mut watcher) = self.child.lock().unwrap().take() {
            // The watcher's child: the server is the shell's only job.
            let _ = Command::new("pkill")
                .args(["-9", "-P", &watcher.id().to_string()])
                .status();
            let _ = watcher.kill();
            let _ = watcher.wait();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while port_open(self.port) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills it and starts it again on the same port with the same store.
    pub(crate) fn restart(&self) -> Result<(), String> {
        self.kill();
        self.start()
    }

    /// `nats://127.0.0.1:<port>`.
    pub(crate) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsNode {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.store);
        let _ = std::fs::remove_file(self.store.with_extension("log"));
    }
}

fn port_open(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// A single private server; `None` (after a skip line) without
/// `nats-server`.
pub(crate) fn single() -> Option<NatsNode> {
    server_bin()?;
    let node = with_fresh_ports(|| {
        let node = NatsNode::new("ezmq-single", free_port(), Vec::new());
        node.start().map(|()| node)
    });
    Some(node)
}

/// Tries to start servers on free ports up to three times: a port found
/// free can be taken by another process (an outgoing connection's local
/// port) before the server binds it. Panics (a test helper) when every
/// try failed.
fn with_fresh_ports<T>(mut start: impl FnMut() -> Result<T, String>) -> T {
    let mut failures = Vec::new();
    for _ in 0..3 {
        match start() {
            Ok(started) => return started,
            Err(failure) => {
                eprintln!("{failure}; trying other ports");
                failures.push(failure);
            }
        }
    }
    panic!("nats-server did not start: {failures:?}");
}

/// A three-node JetStream cluster on loopback.
#[derive(Debug)]
pub(crate) struct NatsCluster {
    pub(crate) nodes: Vec<NatsNode>,
}

impl NatsCluster {
    /// Starts three nodes routed to each other; `None` (after a skip
    /// line) without `nats-server`.
    pub(crate) fn start() -> Option<Self> {
        server_bin()?;
        Some(with_fresh_ports(Self::start_on_free_ports))
    }

    fn start_on_free_ports() -> Result<Self, String> {
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let nodes: Vec<NatsNode> = ports
            .iter()
            .enumerate()
            .map(|(i, (client, cluster))| {
                let routes: Vec<String> = ports
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, (_, c))| format!("nats://127.0.0.1:{c}"))
                    .collect();
                NatsNode::new(
                    &format!("ezmq-n{i}"),
                    *client,
                    vec![
                        "--cluster_name".to_owned(),
                        "ezmq".to_owned(),
                        "--cluster".to_owned(),
                        format!("nats://127.0.0.1:{cluster}"),
                        "--routes".to_owned(),
                        routes.join(","),
                    ],
                )
            })
            .collect();
        for node in &nodes {
            node.start()?;
        }
        Ok(NatsCluster { nodes })
    }

    /// Every node's address in one URL.
    pub(crate) fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("nats://{}", hosts.join(","))
    }
}

/// Connects with `config`, again and again for up to 30 s while the
/// servers elect their JetStream leaders.
pub(crate) async fn connect_until_ready(
    config: ezmq_nats::NatsConfig,
) -> ezmq_core::Result<ezmq_core::Client> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match ezmq_nats::connect(config.clone()).await {
            Ok(client) => return Ok(client),
            Err(err) if Instant::now() < deadline => {
                tracing::debug!(error = %err, "the cluster is not ready yet");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(err) => return Err(err),
        }
    }
}
