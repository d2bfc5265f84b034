//! Each way a connection can fail, against the real brokers (and a host
//! name under `.invalid`, which never resolves): what the
//! error says, its kind, and whether it is retryable — and that a connect
//! retry window gives up at once for what only a configuration change
//! fixes (wrong password, unknown database or virtual host, another
//! protocol at the port).

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ezmq::{Config, ConnectFailure, Error, MqClient};
use ezmq_disque_server::{EmbeddedDisque, ServerConfig};

/// A loopback port nothing listens on right now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// One row: a URL, the failure it must give, and words the message says.
struct Row {
    what: &'static str,
    url: String,
    failure: ConnectFailure,
    says: &'static str,
}

/// Connects to every row's URL and checks the error; the non-retryable
/// ones also with a 30 s retry window, which must not be waited out.
async fn check(rows: Vec<Row>) {
    for row in rows {
        let err = Config::new(&row.url)
            .with_connect_timeout(Duration::from_secs(3))
            .connect()
            .await
            .err()
            .unwrap_or_else(|| panic!("{}: {} connected", row.what, row.url));
        let text = err.to_string();
        let Error::Connect { failure, .. } = &err else {
            panic!("{}: not a connection error: {err:?}", row.what);
        };
        assert_eq!(*failure, row.failure, "{}: {text}", row.what);
        assert!(
            text.contains(row.says),
            "{}: {text:?} lacks {:?}",
            row.what,
            row.says
        );
        assert!(
            !text.contains("s3cret") && !text.contains("wrong-pw"),
            "{}: {text}",
            row.what
        );
        assert_eq!(
            err.is_retryable(),
            row.failure.is_retryable(),
            "{}",
            row.what
        );
        if !row.failure.is_retryable() {
            let start = Instant::now();
            let again = Config::new(&row.url)
                .with_connect_timeout(Duration::from_secs(3))
                .with_connect_retry(Duration::from_secs(30))
                .connect()
                .await
                .expect_err("fails again");
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{}: retried a failure no retry can fix ({:?}): {again}",
                row.what,
                start.elapsed()
            );
        }
    }
}

/// `Some` when the shared broker at `url` answers, else `None` after the
/// skip line.
async fn reachable(url: &str, backend: &str) -> Option<()> {
    let client = support::connect(url, backend).await?;
    client
        .shutdown(Duration::from_secs(1))
        .await
        .expect("shutdown");
    Some(())
}

fn authority(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    rest.split(['/', '?']).next().unwrap_or_default().to_owned()
}

fn redis_url() -> String {
    std::env::var("EZMQ_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn amqp_url() -> String {
    std::env::var("EZMQ_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

/// A private `redis-server` with a password; killed on drop.
struct PrivateRedis(Child, u16);

impl PrivateRedis {
    async fn start(password: &str) -> Option<PrivateRedis> {
        let port = free_port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--requirepass", password])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let server = PrivateRedis(child, port);
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Some(server);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("redis-server did not start on {port}");
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn redis_connection_failures_say_what_to_check() {
    let shared = redis_url();
    if reachable(&shared, "redis").await.is_none() {
        return;
    }
    let amqp = amqp_url();
    let Some(private) = PrivateRedis::start("s3cret").await else {
        println!("skipped: redis-server cannot be started here");
        return;
    };
    let disque = EmbeddedDisque::start(ServerConfig::default().with_port(0))
        .await
        .expect("embedded server");
    let port = private.1;
    check(vec![
        Row {
            what: "nothing listens",
            url: format!("redis://127.0.0.1:{}", free_port()),
            failure: ConnectFailure::Refused,
            says: "connection refused",
        },
        Row {
            what: "unknown host",
            url: "redis://no-such-host.invalid:6379".to_owned(),
            failure: ConnectFailure::UnknownHost,
            says: "unknown host",
        },
        Row {
            what: "wrong password",
            url: format!("redis://:wrong-pw@127.0.0.1:{port}"),
            failure: ConnectFailure::AuthenticationFailed,
            says: "authentication failed",
        },
        Row {
            what: "no password",
            url: format!("redis://127.0.0.1:{port}"),
            failure: ConnectFailure::AuthenticationFailed,
            says: "authentication failed",
        },
        Row {
            what: "unknown database",
            url: format!("{}/99", shared.trim_end_matches('/')),
            failure: ConnectFailure::UnknownDatabase,
            says: "database 99",
        },
        Row {
            what: "RabbitMQ's port",
            url: format!("redis://{}", authority(&amqp)),
            failure: ConnectFailure::WrongProtocol,
            says: "use an amqp:// URL",
        },
        Row {
            what: "Disque's port",
            url: format!("redis://{}", disque.addr()),
            failure: ConnectFailure::WrongProtocol,
            says: "use a disque:// URL",
        },
    ])
    .await;
    disque.shutdown().await;
}

#[tokio::test]
async fn disque_connection_failures_say_what_to_check() {
    let shared = redis_url();
    if reachable(&shared, "redis").await.is_none() {
        return;
    }
    let amqp = amqp_url();
    let server = EmbeddedDisque::start(
        ServerConfig::default()
            .with_port(0)
            .with_requirepass(Some("s3cret".into())),
    )
    .await
    .expect("embedded server");
    check(vec![
        Row {
            what: "nothing listens",
            url: format!("disque://127.0.0.1:{}", free_port()),
            failure: ConnectFailure::Refused,
            says: "connection refused",
        },
        Row {
            what: "unknown host",
            url: "disque://no-such-host.invalid:7711".to_owned(),
            failure: ConnectFailure::UnknownHost,
            says: "unknown host",
        },
        Row {
            what: "wrong password",
            url: format!("disque://:wrong-pw@{}", server.addr()),
            failure: ConnectFailure::AuthenticationFailed,
            says: "authentication failed",
        },
        Row {
            what: "Redis' port",
            url: format!("disque://{}", authority(&shared)),
            failure: ConnectFailure::WrongProtocol,
            says: "use a redis:// URL",
        },
        Row {
            what: "RabbitMQ's port",
            url: format!("disque://{}", authority(&amqp)),
            failure: ConnectFailure::WrongProtocol,
            says: "use an amqp:// URL",
        },
    ])
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn rabbitmq_connection_failures_say_what_to_check() {
    let amqp = amqp_url();
    if reachable(&amqp, "rabbitmq").await.is_none() {
        return;
    }
    let host = authority(&amqp);
    let redis = redis_url();
    check(vec![
        Row {
            what: "nothing listens",
            url: format!("amqp://guest:guest@127.0.0.1:{}/%2f", free_port()),
            failure: ConnectFailure::Refused,
            says: "connection refused",
        },
        Row {
            what: "unknown host",
            url: "amqp://guest:guest@no-such-host.invalid:5672/%2f".to_owned(),
            failure: ConnectFailure::UnknownHost,
            says: "unknown host",
        },
        Row {
            what: "wrong password",
            url: format!("amqp://guest:wrong-pw@{host}/%2f"),
            failure: ConnectFailure::AuthenticationFailed,
            says: "authentication failed",
        },
        Row {
            what: "unknown virtual host",
            url: format!("amqp://guest:guest@{host}/nosuchvhost"),
            failure: ConnectFailure::UnknownDatabase,
            says: "virtual host \"nosuchvhost\"",
        },
        Row {
            what: "Redis' port",
            url: format!("amqp://guest:guest@{}/%2f", authority(&redis)),
            failure: ConnectFailure::WrongProtocol,
            says: "use a redis:// or disque:// URL",
        },
    ])
    .await;
}

fn postgres_url() -> String {
    std::env::var("EZMQ_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

#[tokio::test]
async fn postgres_connection_failures_say_what_to_check() {
    let pg = postgres_url();
    if reachable(&pg, "postgres").await.is_none() {
        return;
    }
    let host = authority(&pg);
    let redis = redis_url();
    let amqp = amqp_url();
    check(vec![
        Row {
            what: "nothing listens",
            url: format!("postgres://postgres:s3cret@127.0.0.1:{}/test", free_port()),
            failure: ConnectFailure::Refused,
            says: "connection refused",
        },
        Row {
            what: "unknown host",
            url: "postgres://postgres@no-such-host.invalid:5432/test".to_owned(),
            failure: ConnectFailure::UnknownHost,
            says: "unknown host",
        },
        Row {
            what: "unknown role",
            url: format!("postgres://ezmq_no_such_role:s3cret@{host}/test"),
            failure: ConnectFailure::AuthenticationFailed,
            says: "authentication failed",
        },
        Row {
            what: "unknown database",
            url: format!("postgres://postgres@{host}/ezmq_no_such_database"),
            failure: ConnectFailure::UnknownDatabase,
            says: "ezmq_no_such_database",
        },
        Row {
            what: "Redis' port",
            url: format!("postgres://postgres@{}/test", authority(&redis)),
            failure: ConnectFailure::WrongProtocol,
            says: "use a redis:// or disque:// URL",
        },
        Row {
            what: "RabbitMQ's port",
            url: format!("postgres://postgres@{}/test", authority(&amqp)),
            failure: ConnectFailure::WrongProtocol,
            says: "use an amqp:// URL",
        },
    ])
    .await;
}
