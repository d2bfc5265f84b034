//! A Redis password is never printed: not in errors (`Display`, `{:#}`,
//! `Debug`), not in any tracing event or span field at TRACE level, not in
//! the `Debug` of the configuration, the backend or the client; with the
//! right password and a wrong one, in every URL form. Against a private
//! `redis-server --requirepass`.
//!
//! This test binary installs a global tracing subscriber that records
//! every event and span, so it holds this one test only.

mod support;

use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ezmq_core::{Job, MqClient, MqClientExt};
use ezmq_redis::{RedisBackend, RedisConfig};
use tokio::sync::mpsc;
use tokio::time::timeout;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Every event and span field seen, as text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<String>>>);

impl Captured {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Writes `name=value` for each field; errors with their whole chain.
struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let _ = write!(self.0, " {}={value} / {value:?}", field.name());
        let mut source = value.source();
        while let Some(cause) = source {
            let _ = write!(self.0, ": {cause} / {cause:?}");
            source = cause.source();
        }
    }
}

impl<S: Subscriber> Layer<S> for Captured {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields(format!("event {}", event.metadata().target()));
        event.record(&mut fields);
        self.push(fields.0);
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        let mut fields = Fields(format!("span {}", attrs.metadata().name()));
        attrs.record(&mut fields);
        self.push(fields.0);
    }

    fn on_record(&self, _: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut fields = Fields("span record".to_owned());
        values.record(&mut fields);
        self.push(fields.0);
    }
}

/// Every form a user may print an error in.
fn error_texts(err: &ezmq_core::Error) -> String {
    format!("{err}\n{err:#}\n{err:?}\n{err:#?}")
}

#[tokio::test]
async fn redis_passwords_never_appear_in_errors_logs_or_debug() {
    if !support::have_redis_server() {
        println!("skipped: no broker at redis-server (not installed)");
        return;
    }
    let captured = Captured::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(captured.clone()))
        .expect("the only subscriber of this test binary");

    let secret = format!("pw-{}", uuid::Uuid::new_v4().simple());
    let wrong = format!("bad-{}", uuid::Uuid::new_v4().simple());
    let port = support::free_port();
    let mut server =
        support::RedisProcess::start(port, &["--requirepass".to_owned(), secret.clone()]).await;
    let mut texts: Vec<String> = Vec::new();

    // The right password, `:pass@` and `user:pass@` forms.
    let right = format!("redis://:{secret}@127.0.0.1:{port}");
    let with_user = format!("redis://default:{secret}@127.0.0.1:{port}/0");
    let config = RedisConfig::new(right.clone())
        .with_connect_timeout(Duration::from_secs(1))
        .with_command_timeout(Duration::from_secs(1));
    texts.push(format!("{config:?} {config:#?}"));
    let backend = RedisBackend::connect(config.clone()).await.unwrap();
    texts.push(format!("{backend:?} {backend:#?}"));
    drop(backend);
    let user_config: RedisConfig = with_user.parse().unwrap();
    texts.push(format!("{user_config:?}"));
    let user_client = ezmq_redis::connect(user_config).await.unwrap();
    user_client.shutdown(Duration::from_secs(5)).await.unwrap();

    let client = ezmq_redis::connect(config.clone()).await.unwrap();
    texts.push(format!("{client:?} {client:#?}"));
    let topic = support::topic("secrets");
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    client
        .add_consume_listener(&topic, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(String::from_utf8_lossy(job.body()).into_owned());
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    client.push(&topic, "one".into()).await.unwrap();
    let got = timeout(Duration::from_secs(15), rx.recv()).await.unwrap();
    assert_eq!(got.as_deref(), Some("one"));

    // Errors while the server is down (push and the listener's fetches,
    // which log their cause), then a new connection is refused.
    server.kill();
    for _ in 0..3 {
        let err = client.push(&topic, "down".into()).await.unwrap_err();
        texts.push(error_texts(&err));
    }
    let err = ezmq_redis::connect(config.clone()).await.unwrap_err();
    assert!(err.is_connection_error(), "{err:#}");
    texts.push(error_texts(&err));
    tokio::time::sleep(Duration::from_millis(300)).await; // a few failed fetches
    server.restart().await;
    client.shutdown(Duration::from_secs(5)).await.unwrap();

    // A wrong password, in both forms: authentication failed, and neither
    // password is shown.
    for url in [
        format!("redis://:{wrong}@127.0.0.1:{port}"),
        format!("redis://default:{wrong}@127.0.0.1:{port}"),
    ] {
        let config: RedisConfig = url.parse().unwrap();
        texts.push(format!("{config:?}"));
        let err = ezmq_redis::connect(config.with_connect_timeout(Duration::from_secs(2)))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("authentication failed"),
            "the error says authentication failed: {err:#}"
        );
        assert!(!err.is_retryable(), "{err:#}");
        texts.push(error_texts(&err));
    }

    // The cluster form (this server is no cluster: connecting fails) and
    // forms this build refuses.
    let cluster: RedisConfig = format!("redis+cluster://:{secret}@127.0.0.1:{port}")
        .parse()
        .unwrap();
    texts.push(format!("{cluster:?}"));
    let err = ezmq_redis::connect(cluster.with_connect_timeout(Duration::from_secs(2)))
        .await
        .unwrap_err();
    texts.push(error_texts(&err));
    for url in [
        format!("rediss://:{secret}@127.0.0.1:{port}"),
        format!("redis+cluster://:{secret}@"),
        format!("redis://:{secret}@a:1,b:2"),
    ] {
        let err = url.parse::<RedisConfig>().unwrap_err();
        texts.push(error_texts(&err));
    }
    let err = ezmq_redis::connect(RedisConfig::new(format!(
        "rediss://:{secret}@127.0.0.1:{port}"
    )))
    .await
    .unwrap_err();
    texts.push(error_texts(&err));

    let lines = captured.lines();
    for text in texts.iter().chain(&lines) {
        assert!(
            !text.contains(&secret) && !text.contains(&wrong),
            "a password was printed: {text}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("connected to Redis") && l.contains(":***@")),
        "the connect log line names the redacted URL: {lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("fetch failed")),
        "failed fetches were logged: {lines:#?}"
    );
    println!(
        "checked {} error/Debug texts and {} tracing events and spans",
        texts.len(),
        lines.len()
    );
}
