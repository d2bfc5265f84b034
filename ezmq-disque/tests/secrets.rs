//! A password never shows: not in log events (every level), errors
//! (`Display`, `{:#}`, `Debug`), nor the `Debug` of the config and client,
//! whether it is right or wrong.

use std::time::Duration;

use ezmq_disque::{DisqueConfig, MqClient};
use ezmq_disque_server::{EmbeddedDisque, ServerConfig};
use ezmq_test_support::{unique_topic, LogCapture};

const SECRET: &str = "s3cr3t-Disque-pw";
const WRONG: &str = "wr0ng-Disque-pw";

fn assert_hidden(what: &str, text: &str) {
    ezmq_test_support::assert_hidden(what, text, &[SECRET, WRONG]);
}

fn all_forms(err: &ezmq_disque::Error) -> String {
    format!("{err}\n{err:#}\n{err:?}")
}

// One thread: every task of the client runs where the capturing
// subscriber is the default.
#[tokio::test(flavor = "current_thread")]
async fn passwords_never_appear_in_logs_errors_or_debug_output() {
    let logs = LogCapture::new();
    let _default = logs.set_default();

    let server = EmbeddedDisque::start(
        ServerConfig::default()
            .with_port(0)
            .with_requirepass(Some(SECRET.into())),
    )
    .await
    .expect("embedded server");
    let addr = server.addr();

    // The right password: the client works, and nothing shows it.
    let url = format!("disque://:{SECRET}@{addr}");
    let config: DisqueConfig = url.parse().expect("URL");
    assert_hidden("Debug of the config", &format!("{config:?}"));
    let client = ezmq_disque::connect(config).await.expect("connect");
    assert_hidden("Debug of the client", &format!("{client:?}"));
    let topic = unique_topic("secrets");
    client.push(&topic, "x".into()).await.expect("push");
    client
        .shutdown(Duration::from_secs(2))
        .await
        .expect("shutdown");

    // A wrong password: the error says what failed, never the password.
    let wrong = ezmq_disque::connect_url(&format!("disque://:{WRONG}@{addr}"))
        .await
        .expect_err("a wrong password is refused");
    assert!(
        matches!(
            wrong,
            ezmq_disque::Error::Connect {
                failure: ezmq_disque::ConnectFailure::AuthenticationFailed,
                ..
            }
        ),
        "{wrong:?}"
    );
    assert!(
        wrong.to_string().contains("authentication failed"),
        "{wrong}"
    );
    assert_hidden("the error of a wrong password", &all_forms(&wrong));

    // A URL that does not parse.
    let bad = ezmq_disque::connect_url(&format!("disque://:{SECRET}@{addr}:x"))
        .await
        .expect_err("a bad port is refused");
    assert_hidden("the error of a bad URL", &all_forms(&bad));

    server.shutdown().await;
    let logs = logs.text();
    assert!(
        logs.contains("connected to Disque"),
        "the capture saw the client's events: {logs}"
    );
    assert_hidden("the log", &logs);
}
