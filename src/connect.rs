//! `connect_url`: one entry point, the backend picked by the URL's scheme.

pub(crate) use ezmq_core::spi::url_redaction::redact_password as redact;
use ezmq_core::{Client, Error, Result};

use crate::config::Config;

/// The URL schemes [`connect_url`] knows, with the backend each picks and
/// the cargo feature of `ezmq` that brings it.
pub const SCHEMES: &[(&str, &str, &str)] = &[
    ("disque", "Disque (or the embedded server)", "disque"),
    ("redis", "Redis (Streams)", "redis"),
    ("rediss", "Redis over TLS", "redis"),
    ("redis+cluster", "Redis Cluster", "redis"),
    ("amqp", "RabbitMQ (AMQP 0-9-1)", "rabbitmq"),
    ("amqps", "RabbitMQ over TLS", "rabbitmq"),
    ("postgres", "PostgreSQL", "postgres"),
    ("postgresql", "PostgreSQL", "postgres"),
    ("nats", "NATS JetStream", "nats"),
    ("kafka", "Kafka", "kafka"),
];

/// Connects to the broker a URL names and returns a [`Client`]; the same
/// code then runs on any of them.
///
/// | URL | backend |
/// |---|---|
/// | `disque://[:password@]host:port[,host:port...]` | Disque, or the embedded server |
/// | `redis://[:password@]host:port[/db]` | Redis (Streams) |
/// | `redis+cluster://host:port,host:port` | Redis Cluster |
/// | `amqp://user:pass@host:5672/vhost`, `amqps://...` | RabbitMQ |
/// | `postgres://user:pass@host:5432/database`, `postgresql://...` | PostgreSQL |
/// | `nats://[user:pass@]host:4222[,host:port...]` | NATS JetStream |
/// | `kafka://host:9092[,host:port...]` | Kafka (feature `kafka`, off by default) |
///
/// Settings go in the query string, the same names as
/// [`Config`]'s: `redis://127.0.0.1:6379?prefix=app&max_payload=16MiB`.
/// This is `Config::new(url).connect()`.
///
/// Fails with [`Error::InvalidOption`] (option `url`) for a URL without a
/// known scheme or whose backend feature is off, naming the setting for a
/// bad one, and with [`Error::Connect`] when the broker does not answer or
/// refuses the connection.
///
/// ```no_run
/// # async fn demo() -> ezmq::Result<()> {
/// use ezmq::prelude::*;
///
/// let url = std::env::var("EZMQ_URL").unwrap_or_else(|_| "disque://127.0.0.1:7711".into());
/// let client = ezmq::connect_url(&url).await?;
/// println!("connected to {} with {:?}", client.backend_name(), client.capabilities());
/// # Ok(()) }
/// ```
pub async fn connect_url(url: &str) -> Result<Client> {
    Config::new(url).connect().await
}

/// The error for a URL that cannot be used, its password redacted.
pub(crate) fn bad_url(url: &str, why: &str) -> Error {
    Error::invalid_option("url", format!("{:?}: {why}", redact(url)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unknown_schemes_are_named() {
        let err = connect_url("mqtt://broker:1883").await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("unknown scheme `mqtt`"), "{text}");
        assert!(text.contains("redis://"), "{text}");
        let err = connect_url("localhost:7711").await.unwrap_err();
        assert!(err.to_string().contains("no scheme"), "{err}");
        let err = connect_url("ftp://user:secret@host").await.unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
    }
}
