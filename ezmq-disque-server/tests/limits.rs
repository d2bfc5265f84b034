//! Memory safety against clients: small requests before AUTH, one budget
//! for the input buffered by all clients, and stalled partial requests.

mod support;

use ezmq_disque_server::ServerConfig;
use redis::Value;
use std::time::Duration;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One INFO field as an integer.
async fn info_field(c: &mut redis::aio::MultiplexedConnection, field: &str) -> usize {
    let info: String = redis::cmd("INFO").query_async(c).await.expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO has no {field}: {info}"))
}

/// Sends the start of a request announcing a bulk of `announced` bytes,
/// then up to `send` bytes of it in 64 KiB pieces (stops when the server
/// closes). Returns what the server replied and whether it closed.
async fn huge_bulk(
    addr: std::net::SocketAddr,
    prefix: &[u8],
    announced: usize,
    send: usize,
) -> (String, bool, TcpStream) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(prefix).await.expect("write");
    let header = format!("*4\r\n$6\r\nADDJOB\r\n$1\r\nq\r\n${announced}\r\n");
    let _ = s.write_all(header.as_bytes()).await;
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0;
    while sent < send {
        match tokio::time::timeout(Duration::from_secs(10), s.write_all(&chunk)).await {
            Ok(Ok(())) => sent += chunk.len(),
            _ => break,
        }
    }
    // Whatever the server said so far, without waiting for a reply that
    // never comes to a request still in progress.
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    let closed = loop {
        match tokio::time::timeout(Duration::from_millis(300), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    (String::from_utf8_lossy(&out).into_owned(), closed, s)
}

#[tokio::test]
async fn unauthenticated_clients_cannot_send_big_requests() {
    let server = start_with(ServerConfig::default().with_requirepass(Some("pw".into()))).await;
    // The attack of the issue: 20 connections that never authenticate each
    // start a 60 MB request. Each is refused at the bulk header.
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let addr = server.addr();
        tasks.push(tokio::spawn(async move {
            huge_bulk(addr, b"", 60_000_000, 1 << 20).await
        }));
    }
    for t in tasks {
        let (out, closed, _s) = t.await.expect("task");
        assert!(
            out.starts_with("-ERR Protocol error: unauthenticated bulk length"),
            "{out:?}"
        );
        assert!(closed);
    }
    // Too many arguments before AUTH are refused too.
    let (out, closed) = raw_exchange(server.addr(), b"*11\r\n").await;
    assert!(String::from_utf8_lossy(&out).contains("unauthenticated multibulk length"));
    assert!(closed);
    // After AUTH, big requests are fine.
    let mut c = conn(&server).await;
    let _: () = redis::cmd("AUTH")
        .arg("pw")
        .query_async(&mut c)
        .await
        .unwrap();
    let body = "b".repeat(1 << 20);
    let id = addjob(&mut c, &queue("big"), &body, &[]).await;
    assert!(id.starts_with("D-"));
    assert!(info_field(&mut c, "mem_clients_normal").await < 4 << 20);
    server.shutdown().await;
}

#[tokio::test]
async fn input_of_all_clients_together_is_capped() {
    let budget = 4 << 20;
    let server = start_with(
        ServerConfig::default()
            .with_max_request_bytes(3 << 20)
            .with_max_query_buffers_bytes(budget),
    )
    .await;
    // 20 clients each start a request of 3 MB and send 2 MiB of it: 40 MiB
    // would be buffered without the shared budget.
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let addr = server.addr();
        tasks.push(tokio::spawn(async move {
            huge_bulk(addr, b"", 3_000_000, 2 << 20).await
        }));
    }
    let mut refused = 0;
    let mut open = Vec::new();
    for t in tasks {
        let (out, closed, s) = t.await.expect("task");
        if closed {
            assert!(out.contains("over the limit"), "{out:?}");
            refused += 1;
        } else {
            open.push(s); // still mid-request: its buffer stays held
        }
    }
    assert!(refused >= 10, "only {refused} of 20 clients were refused");
    let mut c = conn(&server).await;
    let held = info_field(&mut c, "mem_clients_normal").await;
    // The budget plus what one growth step of the last client can add.
    assert!(held <= budget + (4 << 20), "{held} bytes buffered");
    // Small clients still work.
    assert_eq!(
        value(&mut c, &["PING"]).await.unwrap(),
        Value::SimpleString("PONG".into())
    );
    let id = addjob(&mut c, &queue("small"), "hello", &[]).await;
    assert!(id.starts_with("D-"));
    drop(open);
    server.shutdown().await;
}

#[tokio::test]
async fn a_stalled_partial_request_is_dropped() {
    let server =
        start_with(ServerConfig::default().with_request_stall_timeout(Duration::from_millis(200)))
            .await;
    let mut idle = conn(&server).await;
    let mut s = TcpStream::connect(server.addr()).await.expect("connect");
    s.write_all(b"*2\r\n$4\r\nPING\r\n$10\r\nab")
        .await
        .expect("write");
    let mut buf = [0u8; 64];
    let closed = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "{closed:?}");
    // A client that is merely idle between requests stays connected
    // (checked well after the stall timeout).
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        value(&mut idle, &["PING"]).await.unwrap(),
        Value::SimpleString("PONG".into())
    );
    server.shutdown().await;
}
