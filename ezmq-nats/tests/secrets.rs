//! Passwords never appear in errors or `Debug` output, and a connection
//! failure says what went wrong: refused, or another kind of server at
//! the port.

use ezmq_core::{ConnectFailure, Error};
use ezmq_nats::NatsConfig;
use ezmq_test_support::{redis_url, skip_or_require};

#[tokio::test]
async fn a_refused_connection_names_the_url_without_its_password() {
    // Port 9 (discard) is closed on loopback.
    let url = "nats://app:hunter2@127.0.0.1:9?connect_timeout=2s";
    let err = ezmq_nats::connect_url(url)
        .await
        .expect_err("nothing listens on port 9");
    let text = format!("{err} {err:?} {err:#}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("127.0.0.1:9"), "the URL is named: {text}");
    assert!(
        matches!(
            err,
            Error::Connect {
                failure: ConnectFailure::Refused | ConnectFailure::TimedOut,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable(), "a refused connection may succeed later");
}

#[tokio::test]
async fn redis_at_the_port_is_named() {
    let redis = redis_url();
    let Some(addr) = redis.strip_prefix("redis://") else {
        return;
    };
    if tokio::net::TcpStream::connect(addr).await.is_err() {
        skip_or_require("redis", &redis, &"no answer");
        return;
    }
    let err = ezmq_nats::connect_url(&format!("nats://{addr}?connect_timeout=1s"))
        .await
        .expect_err("Redis is not NATS");
    assert!(
        matches!(
            err,
            Error::Connect {
                failure: ConnectFailure::WrongProtocol,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("redis://"), "{err}");
}

#[test]
fn config_debug_hides_the_password() {
    let config: NatsConfig = "nats://app:hunter2@nats.internal:4222?lease=10s"
        .parse()
        .expect("a valid URL");
    let shown = format!("{config:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("app:***@nats.internal"), "{shown}");
}
