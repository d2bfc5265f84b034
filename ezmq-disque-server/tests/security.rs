//! AUTH, limits, malformed input and connection lifecycle.

mod support;

use ezmq_disque_server::ServerConfig;
use redis::Value;
use std::time::Duration;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn auth_required_before_commands() {
    let server = start_with(ServerConfig::default().with_requirepass(Some("s3cret".into()))).await;
    let (out, _) = raw_exchange(
        server.addr(),
        b"PING\r\nAUTH wrong\r\nAUTH s3cret\r\nPING\r\nQUIT\r\n",
    )
    .await;
    let text = String::from_utf8_lossy(&out);
    assert_eq!(
        text,
        "-NOAUTH Authentication required.\r\n-ERR invalid password\r\n+OK\r\n+PONG\r\n+OK\r\n"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn protocol_error_closes_only_that_connection() {
    let server = start().await;
    let (out, closed) = raw_exchange(server.addr(), b"*abc\r\n").await;
    assert!(
        String::from_utf8_lossy(&out).starts_with("-ERR Protocol error: invalid multibulk length")
    );
    assert!(closed);
    let (out, closed) = raw_exchange(server.addr(), b"*1\r\n+PING\r\n").await;
    assert!(String::from_utf8_lossy(&out).starts_with("-ERR Protocol error: expected '$'"));
    assert!(closed);
    let mut c = conn(&server).await;
    assert_eq!(
        value(&mut c, &["PING"]).await.unwrap(),
        Value::SimpleString("PONG".into())
    );
}

#[tokio::test]
async fn oversized_requests_are_refused() {
    let server = start_with(ServerConfig::default().with_max_request_bytes(4096)).await;
    // A bulk length beyond the limit is refused before any allocation.
    let (out, closed) =
        raw_exchange(server.addr(), b"*3\r\n$6\r\nADDJOB\r\n$999999999999\r\n").await;
    assert!(
        String::from_utf8_lossy(&out).contains("Protocol error"),
        "{out:?}"
    );
    assert!(closed);
    // An endless inline line is refused too.
    let junk = vec![b'x'; 200 * 1024];
    let (out, closed) = raw_exchange(server.addr(), &junk).await;
    assert!(String::from_utf8_lossy(&out).contains("Protocol error"));
    assert!(closed);
    // Random garbage never takes the server down.
    let mut seed = 0x1234_5678_u64;
    for _ in 0..20 {
        let garbage: Vec<u8> = (0..512)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let _ = raw_exchange(server.addr(), &garbage).await;
    }
    let mut c = conn(&server).await;
    assert_eq!(
        value(&mut c, &["PING"]).await.unwrap(),
        Value::SimpleString("PONG".into())
    );
}

#[tokio::test]
async fn max_clients_refuses_extra_connections() {
    let server = start_with(ServerConfig::default().with_max_clients(2)).await;
    let mut a = TcpStream::connect(server.addr()).await.unwrap();
    let mut b = TcpStream::connect(server.addr()).await.unwrap();
    for s in [&mut a, &mut b] {
        s.write_all(b"PING\r\n").await.unwrap();
        let mut buf = [0u8; 7];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"+PONG\r\n");
    }
    let (out, closed) = raw_exchange(server.addr(), b"").await;
    assert_eq!(
        String::from_utf8_lossy(&out),
        "-ERR max number of clients reached\r\n"
    );
    assert!(closed);
}

#[tokio::test]
async fn maxmemory_refuses_addjob() {
    let server = start_with(ServerConfig::default().with_max_memory_bytes(10_000)).await;
    let mut c = conn(&server).await;
    let q = queue("oom");
    let big = "x".repeat(20_000);
    let err = value(&mut c, &["ADDJOB", &q, &big, "0"]).await.unwrap_err();
    assert_eq!(err.code(), Some("OOM"));
    addjob(&mut c, &q, "small", &[]).await;
}

#[tokio::test]
async fn blocked_client_disconnect_leaves_nothing_behind() {
    let server = start().await;
    let mut c = conn(&server).await;
    let q = queue("disc");
    let mut raw = TcpStream::connect(server.addr()).await.unwrap();
    raw.write_all(format!("GETJOB TIMEOUT 0 FROM {q}\r\n").as_bytes())
        .await
        .unwrap();
    let blocked = wait_for(Duration::from_secs(5), || {
        let mut c = c.clone();
        let q = q.clone();
        async move { qstat_field(&mut c, &q, "blocked").await == Some(1) }
    })
    .await;
    assert!(blocked.is_some());
    drop(raw);
    let released = wait_for(Duration::from_secs(5), || {
        let mut c = c.clone();
        let q = q.clone();
        async move { qstat_field(&mut c, &q, "blocked").await == Some(0) }
    })
    .await;
    assert!(released.is_some());
    addjob(&mut c, &q, "kept", &[]).await;
    assert_eq!(int(&mut c, &["QLEN", &q]).await, 1);
}

#[tokio::test]
async fn shutdown_closes_blocked_clients() {
    let server = start().await;
    let mut raw = TcpStream::connect(server.addr()).await.unwrap();
    raw.write_all(b"GETJOB FROM q\r\n").await.unwrap();
    let addr = server.addr();
    tokio::time::timeout(Duration::from_secs(5), server.shutdown())
        .await
        .expect("graceful shutdown");
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(5), raw.read(&mut buf))
        .await
        .expect("closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert!(TcpStream::connect(addr).await.is_err());
}
