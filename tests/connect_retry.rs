//! `Config::connect` waits for a broker that starts late, and says clearly
//! why a connection failed.

use std::time::{Duration, Instant};

use ezmq::{Config, ConnectFailure, Error, MqClient};
use ezmq_disque_server::{EmbeddedDisque, ServerConfig};

/// A loopback port nothing listens on right now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

#[tokio::test]
async fn waits_for_a_broker_that_starts_late() {
    let port = free_port();
    let url = format!("disque://127.0.0.1:{port}");

    // Without a retry window: the refusal at once, said as such.
    let err = Config::new(&url).connect().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Connect {
                failure: ConnectFailure::Refused,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("connection refused"), "{err}");

    // With one: the server comes up a second later and the client gets in.
    let server = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        EmbeddedDisque::start(ServerConfig::default().with_port(port))
            .await
            .expect("start the server on the reserved port")
    });
    let start = Instant::now();
    let client = Config::new(&url)
        .with_connect_retry(Duration::from_secs(30))
        .connect()
        .await
        .expect("connects once the server is up");
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "{:?}",
        start.elapsed()
    );
    client.push("late.start", "ok".into()).await.unwrap();
    client.shutdown(Duration::from_secs(1)).await.unwrap();
    server.await.unwrap().shutdown().await;
}

#[tokio::test]
async fn rejected_credentials_are_not_retried() {
    let server = EmbeddedDisque::start(
        ServerConfig::default()
            .with_port(0)
            .with_requirepass(Some("right".into())),
    )
    .await
    .unwrap();
    let url = format!("disque://:wrong@{}", server.addr());
    let start = Instant::now();
    let err = Config::new(&url)
        .with_connect_retry(Duration::from_secs(30))
        .connect()
        .await
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "gave up at once, not after the retry window: {:?}",
        start.elapsed()
    );
    assert!(!err.is_retryable(), "{err}");
    assert!(err.to_string().contains("authentication failed"), "{err}");
    assert!(!err.to_string().contains("wrong"), "password leaked: {err}");
    server.shutdown().await;
}
