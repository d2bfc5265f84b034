//! What a failed connection says: classified from the driver's error
//! kinds and SQLSTATE codes, with the host's resolution and the server
//! that answers at the port looked at when those do not tell.

use std::time::Duration;

use ezmq_core::spi::protocol_probe;
use ezmq_core::{ConnectFailure, Error};

use crate::error::PostgresBackendError;

/// Another kind of server answers at the address.
#[derive(Debug, thiserror::Error)]
#[error("{advice}")]
pub(crate) struct NotPostgres {
    /// The scheme to use instead, from the server's first bytes.
    advice: &'static str,
}

/// The default PostgreSQL port.
const DEFAULT_PORT: u16 = 5432;

/// The [`Error::Connect`] for a failed connection to `url` (shown as
/// `redacted`).
pub(crate) async fn connect_error(url: &str, redacted: String, err: sqlx::Error) -> Error {
    let failure = classify(&err);
    let addr = protocol_probe::host_port(url, DEFAULT_PORT);
    if let (ConnectFailure::Closed | ConnectFailure::Other, Some(addr)) = (failure, &addr) {
        if !protocol_probe::resolves(addr).await {
            return Error::connect_failed(redacted, ConnectFailure::UnknownHost, err);
        }
    }
    if let (
        ConnectFailure::WrongProtocol | ConnectFailure::Closed | ConnectFailure::Other,
        Some(addr),
    ) = (failure, &addr)
    {
        if let Some(server) = protocol_probe::identify(addr, Duration::from_secs(1)).await {
            return Error::connect_failed(
                redacted,
                ConnectFailure::WrongProtocol,
                NotPostgres {
                    advice: server.advice(),
                },
            );
        }
    }
    Error::connect_failed(redacted, failure, err)
}

/// The [`Error::Connect`] for a connection to `url` that got no answer
/// within `after`: another server may be waiting for more bytes of its
/// own protocol (Redis does).
pub(crate) async fn timed_out(url: &str, redacted: String, after: Duration) -> Error {
    if let Some(addr) = protocol_probe::host_port(url, DEFAULT_PORT) {
        if let Some(server) = protocol_probe::identify(&addr, Duration::from_secs(1)).await {
            return Error::connect_failed(
                redacted,
                ConnectFailure::WrongProtocol,
                NotPostgres {
                    advice: server.advice(),
                },
            );
        }
    }
    Error::connect_failed(
        redacted,
        ConnectFailure::TimedOut,
        PostgresBackendError::NoReply {
            statement: "connect",
            after,
        },
    )
}

/// How a connection attempt failed, from the driver's error types and
/// SQLSTATE codes.
fn classify(err: &sqlx::Error) -> ConnectFailure {
    match err {
        sqlx::Error::Io(io) => ConnectFailure::of_io(io.kind()).unwrap_or(ConnectFailure::Other),
        sqlx::Error::PoolTimedOut => ConnectFailure::TimedOut,
        sqlx::Error::Tls(_) => ConnectFailure::Tls,
        sqlx::Error::Protocol(_) => ConnectFailure::WrongProtocol,
        sqlx::Error::Database(_) => match crate::error::sqlstate(err).as_deref() {
            Some("28P01" | "28000") => ConnectFailure::AuthenticationFailed,
            Some("3D000") => ConnectFailure::UnknownDatabase,
            Some(code) if code.starts_with("57P") => ConnectFailure::Closed,
            _ => ConnectFailure::Other,
        },
        _ => ConnectFailure::classify(err),
    }
}
