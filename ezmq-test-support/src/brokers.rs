//! The skip/require rule for tests of any backend: a test whose broker does
//! not answer prints `skipped: no broker at URL` and passes, unless
//! `EZMQ_REQUIRE_BROKERS` names its backend (or is `all`).

use std::fmt::Display;

/// The environment variable naming the backends whose broker must answer:
/// comma separated (`disque,redis,rabbitmq`) or `all`.
pub const REQUIRE_ENV: &str = "EZMQ_REQUIRE_BROKERS";

/// The Redis the tests use: `EZMQ_TEST_REDIS_URL`, default
/// `redis://127.0.0.1:6379`.
pub fn redis_url() -> String {
    std::env::var("EZMQ_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// The RabbitMQ the tests use: `EZMQ_TEST_AMQP_URL`, default
/// `amqp://guest:guest@127.0.0.1:5672/%2f`.
pub fn amqp_url() -> String {
    std::env::var("EZMQ_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

/// The PostgreSQL the tests use: `EZMQ_TEST_POSTGRES_URL`, default
/// `postgres://postgres@127.0.0.1:5432/test`.
pub fn postgres_url() -> String {
    std::env::var("EZMQ_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The NATS server the tests use: `EZMQ_TEST_NATS_URL`, default
/// `nats://127.0.0.1:4222`.
pub fn nats_url() -> String {
    std::env::var("EZMQ_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

/// The Kafka test broker's URL: `EZMQ_TEST_KAFKA_URL`, default
/// `kafka://127.0.0.1:9092` (where `.ci/run` starts nisshi).
pub fn kafka_url() -> String {
    std::env::var("EZMQ_TEST_KAFKA_URL").unwrap_or_else(|_| "kafka://127.0.0.1:9092".to_owned())
}

/// A loopback port nothing listens on now (for a private server, or an
/// address that refuses connections).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// True when [`REQUIRE_ENV`] names `backend` (case-insensitive) or `all`.
pub fn broker_required(backend: &str) -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| {
        v.split(',')
            .map(str::trim)
            .any(|b| b.eq_ignore_ascii_case(backend) || b.eq_ignore_ascii_case("all"))
    })
}

/// Called when the broker of `backend` at `url` did not answer: panics
/// when it is required, otherwise prints `skipped: no broker at URL` (the
/// test then returns and passes).
pub fn skip_or_require(backend: &str, url: &str, cause: &dyn Display) {
    if broker_required(backend) {
        panic!("{REQUIRE_ENV} names {backend} but {url} does not answer: {cause}");
    }
    println!("skipped: no broker at {url}");
}
