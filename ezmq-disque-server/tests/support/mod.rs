//! Shared helpers for the integration tests.
#![allow(dead_code)]

use ezmq_disque_server::{EmbeddedDisque, ServerConfig};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Starts a server on 127.0.0.1 with a free port.
pub(crate) async fn start() -> EmbeddedDisque {
    start_with(ServerConfig::default()).await
}

/// Starts a server with `config` on 127.0.0.1 with a free port.
pub(crate) async fn start_with(config: ServerConfig) -> EmbeddedDisque {
    EmbeddedDisque::start(config.with_port(0))
        .await
        .expect("server starts")
}

/// A redis-crate connection with a long response timeout (for blocking GETJOB).
pub(crate) async fn conn(server: &EmbeddedDisque) -> MultiplexedConnection {
    let client = redis::Client::open(format!("redis://{}/", server.addr())).expect("client");
    let cfg = AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(20)));
    client
        .get_multiplexed_async_connection_with_config(&cfg)
        .await
        .expect("connect")
}

/// A unique queue name.
pub(crate) fn queue(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("test-{tag}-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// ADDJOB returning the job id.
pub(crate) async fn addjob(
    c: &mut MultiplexedConnection,
    q: &str,
    body: &str,
    opts: &[&str],
) -> String {
    let mut cmd = redis::cmd("ADDJOB");
    cmd.arg(q).arg(body).arg(0);
    for o in opts {
        cmd.arg(*o);
    }
    cmd.query_async(c).await.expect("ADDJOB")
}

/// An integer-returning command.
pub(crate) async fn int(c: &mut MultiplexedConnection, args: &[&str]) -> i64 {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(c).await.expect("integer reply")
}

/// Any command, raw value.
pub(crate) async fn value(
    c: &mut MultiplexedConnection,
    args: &[&str],
) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(c).await
}

/// QSTAT field as an integer.
pub(crate) async fn qstat_field(
    c: &mut MultiplexedConnection,
    q: &str,
    field: &str,
) -> Option<i64> {
    let v: Option<Vec<Value>> = redis::cmd("QSTAT").arg(q).query_async(c).await.ok()?;
    let v = v?;
    for pair in v.chunks(2) {
        if let (Value::BulkString(k), Value::Int(n)) = (&pair[0], &pair[1]) {
            if k == field.as_bytes() {
                return Some(*n);
            }
        }
    }
    None
}

/// Polls `f` until it returns true or `limit` passes; returns the elapsed time.
pub(crate) async fn wait_for<F, Fut>(limit: Duration, mut f: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        if f().await {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// Writes raw bytes, half-closes, and reads until the server closes (3 s max).
pub(crate) async fn raw_exchange(addr: std::net::SocketAddr, data: &[u8]) -> (Vec<u8>, bool) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(data).await.expect("write");
    // Half-close so the server sees EOF once it has read everything.
    let _ = s.shutdown().await;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        match tokio::time::timeout(Duration::from_secs(3), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    (out, closed)
}
