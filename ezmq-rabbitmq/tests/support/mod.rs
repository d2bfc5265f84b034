//! Shared helpers: the broker URL, the skip rule, unique names, cleanup.
#![allow(dead_code, unreachable_pub)]

use ezmq_core::spi::{Backend, Source};
use ezmq_core::Topic;
use ezmq_rabbitmq::{RabbitBackend, RabbitConfig};
use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use lapin::{Channel, Connection, ConnectionProperties};

/// The broker the tests use.
pub fn url() -> String {
    std::env::var("EZMQ_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

fn required() -> bool {
    std::env::var("EZMQ_REQUIRE_BROKERS").is_ok_and(|v| {
        v.split(',')
            .map(str::trim)
            .any(|b| b == "all" || b == "rabbitmq")
    })
}

/// A config for the test broker, or `None` (after printing the skip
/// line) when nothing answers and the broker is not required.
pub async fn config() -> Option<RabbitConfig> {
    let url = url();
    // Quick to skip; patient where the broker is required (a busy broker
    // can take seconds to accept a connection).
    let patience = if required() { 10 } else { 3 };
    let config = RabbitConfig::default()
        .with_url(url.clone())
        .with_connect_timeout(std::time::Duration::from_secs(patience));
    match RabbitBackend::connect(config.clone()).await {
        Ok(backend) => {
            let _ = backend.close().await;
            Some(config)
        }
        Err(err) if err.is_connection_error() && !required() => {
            println!("skipped: no broker at {url}");
            None
        }
        Err(err) => panic!("RabbitMQ at {url} is required: {err}"),
    }
}

/// A unique topic name.
pub fn topic(what: &str) -> String {
    format!("ezmq-test-{what}-{}", uuid::Uuid::new_v4().simple())
}

/// A raw channel for inspection and cleanup.
pub async fn raw_channel() -> (Connection, Channel) {
    let conn = Connection::connect(&url(), ConnectionProperties::default())
        .await
        .expect("raw connection");
    let channel = conn.create_channel().await.expect("raw channel");
    (conn, channel)
}

/// Deletes queues and exchanges (ignoring the ones already gone).
pub async fn cleanup(queues: &[String], exchanges: &[String]) {
    let (conn, _) = raw_channel().await;
    for q in queues {
        if let Ok(ch) = conn.create_channel().await {
            let _ = ch
                .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
                .await;
        }
    }
    for x in exchanges {
        if let Ok(ch) = conn.create_channel().await {
            let _ = ch
                .exchange_delete(x.as_str().into(), ExchangeDeleteOptions::default())
                .await;
        }
    }
    let _ = conn.close(200, "cleanup".into()).await;
}

/// A unique queue prefix, so a test's delay levels are its own and can be
/// deleted afterwards ([`cleanup_prefixed`]).
pub fn prefix() -> String {
    format!("t{}.", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// Deletes the delay levels under `prefix` and the prefixed `queues`.
pub async fn cleanup_prefixed(prefix: &str, queues: &[String]) {
    let mut all: Vec<String> = queues.iter().map(|q| format!("{prefix}{q}")).collect();
    let mut exchanges = vec![format!("{prefix}__ezmq|delay|deliver")];
    for level in 0..32 {
        all.push(format!("{prefix}__ezmq|delay|L{level:02}"));
        exchanges.push(format!("{prefix}__ezmq|delay|L{level:02}"));
    }
    cleanup(&all, &exchanges).await;
}

/// The source of `topic`'s queue.
pub fn src(topic: &str) -> Source {
    Source::Topic(Topic::new(topic).expect("a valid topic"))
}

/// A backend with a queue prefix of its own (its delay levels are its
/// own: none declared yet, and deleted by [`OwnLevels::close`]) and a
/// unique topic.
#[derive(Debug)]
pub struct OwnLevels {
    /// The queue prefix.
    pub prefix: String,
    /// A backend using it.
    pub backend: RabbitBackend,
    /// The topic's name.
    pub topic: String,
    /// The topic.
    pub t: Topic,
}

impl OwnLevels {
    /// Connects with a fresh [`prefix`] and makes a topic named after
    /// `what`.
    pub async fn connect(config: RabbitConfig, what: &str) -> OwnLevels {
        let prefix = prefix();
        let backend = RabbitBackend::connect(config.with_queue_prefix(prefix.clone()))
            .await
            .expect("connect with a queue prefix");
        let topic = topic(what);
        let t = Topic::new(&topic).expect("a valid topic");
        OwnLevels {
            prefix,
            backend,
            topic,
            t,
        }
    }

    /// Closes the backend and deletes the topic's queue and the delay
    /// levels.
    pub async fn close(self) {
        self.backend.close().await.expect("close the backend");
        cleanup_prefixed(&self.prefix, &[self.topic]).await;
    }
}
