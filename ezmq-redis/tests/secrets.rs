//! A Redis password is never printed: not in errors (`Display`, `{:#}`,
//! `Debug`), not in any tracing event or span field at TRACE level, not in
//! the `Debug` of the configuration, the backend or the client; with the
//! right password and a wrong one, in every URL form. Against a private
//! `redis-server --requirepass`.
//!
//! This test binary installs a global tracing subscriber that records
//! every event and span, so it holds this one test only.

mod support;

use std::time::Duration;

use ezmq_core::{ConsumeOptions, MqClient};
use ezmq_redis::{RedisBackend, RedisConfig};
use ezmq_test_support::{assert_hidden, LogCapture};
use tokio::time::timeout;

/// Every form a user may print an error in.
fn error_texts(err: &ezmq_core::Error) -> String {
    format!("{err}\n{err:#}\n{err:?}\n{err:#?}")
}

#[tokio::test]
async fn redis_passwords_never_appear_in_errors_logs_or_debug() {
    // Before anything else installs the test tracing.
    let captured = LogCapture::new();
    captured.install_global();
    let secret = format!("pw-{}", uuid::Uuid::new_v4().simple());
    let wrong = format!("bad-{}", uuid::Uuid::new_v4().simple());
    let Some(mut server) =
        support::private_redis(&["--requirepass".to_owned(), secret.clone()]).await
    else {
        return;
    };
    let port = server.port;
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
    let mut rx = support::forwarded_bodies(&client, &topic, ConsumeOptions::new()).await;
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
        assert_hidden("an error, Debug or log text", text, &[&secret, &wrong]);
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
