//! What a failed connection says: classified from the client's error
//! kinds, with the host's resolution and the server that answers at the
//! port looked at when those do not tell.

use std::time::Duration;

use async_nats::{ConnectError, ConnectErrorKind};
use ezmq_core::spi::protocol_probe;
use ezmq_core::{ConnectFailure, Error};

use crate::config::NatsConfig;
use crate::error::NatsBackendError;

/// Another kind of server answers at the address.
#[derive(Debug, thiserror::Error)]
#[error("{advice}")]
pub(crate) struct NotNats {
    /// The scheme to use instead, from the server's first bytes.
    advice: &'static str,
}

/// The [`Error::Connect`] for a failed connection with `config` (its URL
/// shown as `redacted`).
pub(crate) async fn connect_error(
    config: &NatsConfig,
    redacted: String,
    err: ConnectError,
) -> Error {
    let failure = match err.kind() {
        ConnectErrorKind::Dns => ConnectFailure::UnknownHost,
        ConnectErrorKind::Authentication | ConnectErrorKind::AuthorizationViolation => {
            ConnectFailure::AuthenticationFailed
        }
        ConnectErrorKind::TimedOut => ConnectFailure::TimedOut,
        ConnectErrorKind::Tls => ConnectFailure::Tls,
        ConnectErrorKind::Io => ConnectFailure::classify(&err),
        ConnectErrorKind::ServerParse | ConnectErrorKind::MaxReconnects => ConnectFailure::Other,
    };
    if let ConnectFailure::TimedOut | ConnectFailure::Closed | ConnectFailure::Other = failure {
        if let Some(wrong) = other_server(config).await {
            return Error::connect_failed(redacted, ConnectFailure::WrongProtocol, wrong);
        }
    }
    Error::connect_failed(redacted, failure, err)
}

/// The [`Error::Connect`] for a connection that got no answer in time:
/// another server may be waiting for bytes of its own protocol (Redis
/// does).
pub(crate) async fn timed_out(config: &NatsConfig, redacted: String) -> Error {
    if let Some(wrong) = other_server(config).await {
        return Error::connect_failed(redacted, ConnectFailure::WrongProtocol, wrong);
    }
    Error::connect_failed(
        redacted,
        ConnectFailure::TimedOut,
        NatsBackendError::NoReply {
            request: "connect",
            after: config.connect_timeout,
        },
    )
}

/// What kind of server, other than NATS, answers at the first address.
async fn other_server(config: &NatsConfig) -> Option<NotNats> {
    let addr = config.servers().into_iter().next()?;
    let server = protocol_probe::identify(&addr, Duration::from_secs(1)).await?;
    if server == protocol_probe::ServerKind::Nats {
        return None;
    }
    Some(NotNats {
        advice: server.advice(),
    })
}
