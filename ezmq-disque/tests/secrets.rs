//! A password never shows: not in log events (every level), errors
//! (`Display`, `{:#}`, `Debug`), nor the `Debug` of the config and client,
//! whether it is right or wrong.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ezmq_disque::{DisqueConfig, MqClient};
use ezmq_disque_server::{EmbeddedDisque, ServerConfig};
use ezmq_test_support::unique_topic;
use tracing_subscriber::fmt::MakeWriter;

const SECRET: &str = "s3cr3t-Disque-pw";
const WRONG: &str = "wr0ng-Disque-pw";

/// Every formatted log event, in one buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn assert_hidden(what: &str, text: &str) {
    for secret in [SECRET, WRONG] {
        assert!(!text.contains(secret), "{what} shows a password: {text}");
    }
}

fn all_forms(err: &ezmq_disque::Error) -> String {
    format!("{err}\n{err:#}\n{err:?}")
}

// One thread: every task of the client runs where the capturing
// subscriber is the default.
#[tokio::test(flavor = "current_thread")]
async fn passwords_never_appear_in_logs_errors_or_debug_output() {
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);

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
