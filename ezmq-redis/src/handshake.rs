//! What connecting checks — that a Redis server answers, with these
//! credentials and this database — and, when it does not, why, from the
//! Redis error's kind and code (never its text).

use std::time::Duration;

use ezmq_core::spi::protocol_probe;
use ezmq_core::{ConnectFailure, Error};
use redis::{ErrorKind, RedisError, Value};

use crate::config::RedisConfig;
use crate::conn::Conn;

/// Why a connection could not be used, said plainly; the source of
/// [`Error::Connect`].
#[derive(Debug, thiserror::Error)]
enum HandshakeError {
    /// Something other than Redis answers.
    #[error("{advice}")]
    OtherServer {
        /// What answers, and the URL scheme to use.
        advice: &'static str,
    },
    /// The server refused the URL's database number.
    #[error(
        "Redis refused database {db} (a server has databases 0 to `databases` - 1, 16 by default)"
    )]
    NoDatabase {
        /// The database of the URL.
        db: i64,
        /// Redis' answer.
        #[source]
        source: RedisError,
    },
}

/// Checks that the server behind `conn` is Redis and takes our credentials:
/// `HELLO` (Redis 6 or later answers with its server info; Disque with an
/// array starting with its protocol version; Redis without the password
/// with `NOAUTH`). An older Redis that has no `HELLO` passes.
pub(crate) async fn check_server(
    conn: &mut Conn,
    config: &RedisConfig,
    addrs: &str,
) -> ezmq_core::Result<()> {
    match redis::cmd("HELLO").query_async::<Value>(conn).await {
        Ok(Value::Array(items)) if matches!(items.first(), Some(Value::Int(_))) => {
            Err(Error::connect_failed(
                addrs,
                ConnectFailure::WrongProtocol,
                HandshakeError::OtherServer {
                    advice: "a Disque server answers there (its HELLO is Disque's); use a \
                             disque:// URL",
                },
            ))
        }
        Ok(_) => Ok(()),
        Err(err) if is_auth(&err) => Err(Error::connect_failed(
            addrs,
            ConnectFailure::AuthenticationFailed,
            err,
        )),
        // `ERR unknown command` on Redis before 6: nothing to learn.
        Err(err) if matches!(err.kind(), ErrorKind::Server(_)) => Ok(()),
        Err(err) => Err(connect_failed(config, addrs, err).await),
    }
}

/// The [`Error::Connect`] for a failed connection to `config`'s server.
pub(crate) async fn connect_failed(config: &RedisConfig, addrs: &str, err: RedisError) -> Error {
    let first = config.urls.first().map(String::as_str).unwrap_or_default();
    connect_error(addrs, Some(first), err).await
}

async fn connect_error(addrs: &str, url: Option<&str>, err: RedisError) -> Error {
    if err.is_timeout() {
        // Another server may wait for more of its own protocol; a hung
        // Redis answers the probe with nothing either.
        if let Some(other) = other_server(url).await {
            return Error::connect_failed(addrs, ConnectFailure::WrongProtocol, other);
        }
    }
    if is_auth(&err) {
        return Error::connect_failed(addrs, ConnectFailure::AuthenticationFailed, err);
    }
    if let (ErrorKind::Server(_), Some(db)) = (err.kind(), url.and_then(database_of)) {
        if db != 0 {
            return Error::connect_failed(
                addrs,
                ConnectFailure::UnknownDatabase,
                HandshakeError::NoDatabase { db, source: err },
            );
        }
    }
    if err.is_connection_refusal() {
        return Error::connect_failed(addrs, ConnectFailure::Refused, err);
    }
    if err.is_timeout() {
        return Error::connect_failed(addrs, ConnectFailure::TimedOut, err);
    }
    let failure = match err.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => ConnectFailure::WrongProtocol,
        _ if err.is_connection_dropped() || err.is_io_error() => ConnectFailure::Closed,
        _ => ConnectFailure::Other,
    };
    if let Some(addr) = url.and_then(|u| protocol_probe::host_port(u, 6379)) {
        if failure != ConnectFailure::WrongProtocol && !protocol_probe::resolves(&addr).await {
            return Error::connect_failed(addrs, ConnectFailure::UnknownHost, err);
        }
    }
    // A reply Redis would not give, or a server that hung up on us: ask
    // what answers there, to say which URL to use.
    if matches!(
        failure,
        ConnectFailure::WrongProtocol | ConnectFailure::Closed
    ) {
        if let Some(other) = other_server(url).await {
            return Error::connect_failed(addrs, ConnectFailure::WrongProtocol, other);
        }
    }
    Error::connect_failed(addrs, failure, err)
}

/// What answers at `url`'s address when it is not a RESP server.
async fn other_server(url: Option<&str>) -> Option<HandshakeError> {
    let addr = protocol_probe::host_port(url?, 6379)?;
    match protocol_probe::identify(&addr, Duration::from_secs(1)).await {
        Some(server) if server != protocol_probe::ServerKind::Resp => {
            Some(HandshakeError::OtherServer {
                advice: server.advice(),
            })
        }
        _ => None,
    }
}

/// True when Redis refused our credentials (or wants some).
fn is_auth(err: &RedisError) -> bool {
    err.kind() == ErrorKind::AuthenticationFailed
        || matches!(err.code(), Some("WRONGPASS" | "NOAUTH"))
}

/// The database number of a `redis://host:port/db` URL.
fn database_of(url: &str) -> Option<i64> {
    let rest = url.split_once("://")?.1;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, hosts)| hosts);
    let (_, path) = rest.split_once('/')?;
    path.trim_end_matches('/').parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_url() {
        assert_eq!(database_of("redis://:pw@h:6379/3"), Some(3));
        assert_eq!(database_of("redis://h:6379"), None);
    }
}
