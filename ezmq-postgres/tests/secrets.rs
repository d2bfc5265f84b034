//! Passwords never appear in errors or `Debug` output, and a connection
//! failure says what went wrong. No server needed: nothing listens on the
//! ports used here.

use ezmq_core::{ConnectFailure, Error};
use ezmq_postgres::PostgresConfig;

#[tokio::test]
async fn a_refused_connection_names_the_url_without_its_password() {
    // Port 9 (discard) is closed on loopback.
    let url = "postgres://app:hunter2@127.0.0.1:9/orders";
    let err = ezmq_postgres::connect_url(url)
        .await
        .expect_err("nothing listens on port 9");
    let text = format!("{err} {err:?} {err:#}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("127.0.0.1:9"), "the URL is named: {text}");
    assert!(
        matches!(
            err,
            Error::Connect {
                failure: ConnectFailure::Refused,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable(), "a refused connection may succeed later");
}

#[test]
fn config_debug_hides_the_password() {
    let config: PostgresConfig = "postgres://app:hunter2@db.internal/orders?lease=10s"
        .parse()
        .expect("a valid URL");
    let shown = format!("{config:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("app:***@db.internal"), "{shown}");
}
