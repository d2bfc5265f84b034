//! A password never shows: not in any log event or span (captured at
//! TRACE, lapin's included), nor in errors (`Display`, `{:#}`, `{:?}`),
//! nor in the `Debug` of the config, the backend or the client. Connects
//! as a user of its own with a password, created (and deleted) with
//! `rabbitmqctl` in the test vhost; without `rabbitmqctl` it skips.

mod support;

use std::time::Duration;

use ezmq_core::{Client, ClientConfig, MqClient};
use ezmq_rabbitmq::{RabbitBackend, RabbitConfig};
use ezmq_test_support::{assert_hidden, LogCapture};

/// Runs `rabbitmqctl` (the node of `RABBITMQ_NODENAME` when set, as the
/// tool itself reads it); `None` when it is not installed.
async fn rabbitmqctl(args: &[&str]) -> Option<bool> {
    let status = tokio::process::Command::new("rabbitmqctl")
        .arg("-q")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .ok()?;
    Some(status.success())
}

/// The vhost of a test URL, decoded (`%2f` is `/`).
fn vhost_of(url: &str) -> String {
    let after_host = url.rsplit_once('/').map_or("", |(_, v)| v);
    let vhost = after_host.split('?').next().unwrap_or_default();
    match vhost {
        "" | "%2f" | "%2F" => "/".to_owned(),
        v => v.replace("%2f", "/").replace("%2F", "/"),
    }
}

/// `url` with `user:password` as its credentials.
fn with_credentials(url: &str, user: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    format!("{scheme}://{user}:{password}@{host}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_never_appear_in_logs_errors_or_debug() {
    if support::config().await.is_none() {
        return;
    }
    let captured = LogCapture::new();
    captured.install_global();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let user = format!("ezmq-secrets-{}", &suffix[..8]);
    let password = format!("pw-{suffix}");
    let vhost = vhost_of(&support::url());
    match rabbitmqctl(&["add_user", &user, &password]).await {
        Some(true) => {}
        _ => {
            println!("skipped: rabbitmqctl cannot add a user here (secrets test)");
            return;
        }
    }
    let granted = rabbitmqctl(&["set_permissions", "-p", &vhost, &user, ".*", ".*", ".*"]).await;
    assert_eq!(granted, Some(true), "set_permissions on {vhost}");

    let mut texts = Vec::new();
    let right = with_credentials(&support::url(), &user, &password);
    let config = RabbitConfig::default()
        .with_url(right.clone())
        .with_connect_timeout(Duration::from_secs(3));
    texts.push(format!("{config:?}"));
    let backend = RabbitBackend::connect(config.clone()).await.unwrap();
    texts.push(format!("{backend:?}"));
    let client = Client::new(backend, ClientConfig::default());
    texts.push(format!("{client:?}"));
    let topic = support::topic("secrets");
    client.push(&topic, "hello".into()).await.unwrap();
    client
        .push_delay(&topic, "later".into(), Duration::from_millis(10))
        .await
        .unwrap();
    // An error from a connected client: a name the broker refuses.
    let refused = client.push(&"x".repeat(300), "too long".into()).await;
    if let Err(err) = refused {
        texts.extend([format!("{err}"), format!("{err:#}"), format!("{err:?}")]);
    }
    client.shutdown(Duration::from_secs(5)).await.unwrap();

    // Wrong password, and a port nothing listens on.
    let wrong = with_credentials(&support::url(), &user, &format!("{password}-wrong"));
    let closed = "amqp://u:pw-closed-port@127.0.0.1:1/%2f".to_owned();
    for url in [wrong, closed] {
        let config = RabbitConfig::default()
            .with_url(url)
            .with_connect_timeout(Duration::from_secs(3));
        let err = RabbitBackend::connect(config).await.unwrap_err();
        texts.extend([format!("{err}"), format!("{err:#}"), format!("{err:?}")]);
    }
    // A URL the configuration refuses (its scheme), password and all.
    let err = ezmq_rabbitmq::connect_url(&right.replacen("amqp://", "amqpx://", 1))
        .await
        .unwrap_err();
    texts.extend([format!("{err}"), format!("{err:#}"), format!("{err:?}")]);
    let _ = rabbitmqctl(&["delete_user", &user]).await;
    support::cleanup(&[topic], &[]).await;

    let logs = captured.text();
    assert!(!logs.is_empty(), "no log event was captured");
    texts.push(logs);
    for text in &texts {
        assert_hidden(
            "an error, Debug or log text",
            text,
            &[&password, "pw-closed-port"],
        );
    }
    println!(
        "secrets: {} texts and {} bytes of TRACE logs checked",
        texts.len(),
        texts.last().map_or(0, String::len)
    );
}
