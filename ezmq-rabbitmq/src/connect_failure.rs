//! Why connecting to RabbitMQ failed, from lapin's error kinds and the
//! AMQP reply codes (never their text), and what answers at the address
//! when it is not an AMQP broker.

use std::time::Duration;

use ezmq_core::spi::protocol_probe::{self, ServerKind};
use ezmq_core::{ConnectFailure, Error};
use lapin::ErrorKind;

use crate::error::RabbitError;

/// AMQP reply code `ACCESS_REFUSED`: the credentials (or the mechanism).
const ACCESS_REFUSED: u16 = 403;
/// AMQP reply code `NOT_ALLOWED`: RabbitMQ's answer for a virtual host
/// that does not exist, or that the user may not open.
const NOT_ALLOWED: u16 = 530;

/// Something other than an AMQP broker answers at the URL's address.
#[derive(Debug, thiserror::Error)]
#[error("{advice}")]
struct NotAmqp {
    /// What answers there, and the URL scheme to use.
    advice: &'static str,
}

/// The virtual host cannot be opened.
#[derive(Debug, thiserror::Error)]
#[error("RabbitMQ refused virtual host {vhost:?} (it does not exist, or the user has no permission on it; `rabbitmqctl list_vhosts` and `list_permissions -p VHOST` tell)")]
struct VhostRefused {
    /// The virtual host of the URL, decoded.
    vhost: String,
    /// lapin's error.
    #[source]
    source: RabbitError,
}

impl RabbitError {
    /// Why a connection attempt that ended with this error failed.
    pub fn connect_failure(&self) -> ConnectFailure {
        match self {
            RabbitError::Timeout { .. } => ConnectFailure::TimedOut,
            RabbitError::Amqp { source, .. } => match source.kind() {
                ErrorKind::ProtocolError(amqp) => match amqp.get_id() {
                    ACCESS_REFUSED => ConnectFailure::AuthenticationFailed,
                    NOT_ALLOWED => ConnectFailure::UnknownDatabase,
                    _ => ConnectFailure::Other,
                },
                ErrorKind::IOError(io) => {
                    ConnectFailure::of_io(io.kind()).unwrap_or(ConnectFailure::Other)
                }
                ErrorKind::ParsingError(_) | ErrorKind::InvalidProtocolVersion(_) => {
                    ConnectFailure::WrongProtocol
                }
                ErrorKind::AuthProviderError(_) => ConnectFailure::AuthenticationFailed,
                _ => ConnectFailure::Other,
            },
            _ => ConnectFailure::Other,
        }
    }
}

/// The [`Error::Connect`] for a failed connection to `url` (shown as
/// `redacted`): classified, the virtual host named, and, when the server
/// answered in another protocol, hung up or said nothing in time, what
/// answers there.
pub(crate) async fn connect_error(url: &str, redacted: String, err: RabbitError) -> Error {
    let failure = err.connect_failure();
    let default_port = if url.starts_with("amqps://") {
        5671
    } else {
        5672
    };
    let addr = protocol_probe::host_port(url, default_port);
    if let (ConnectFailure::Closed | ConnectFailure::Other, Some(addr)) = (failure, &addr) {
        if !protocol_probe::resolves(addr).await {
            return Error::connect_failed(redacted, ConnectFailure::UnknownHost, err);
        }
    }
    match failure {
        ConnectFailure::UnknownDatabase => {
            return Error::connect_failed(
                redacted,
                failure,
                VhostRefused {
                    vhost: vhost_of(url),
                    source: err,
                },
            )
        }
        // Another server may wait for more bytes of its own protocol (Redis
        // does, after an AMQP header), or hang up on it.
        ConnectFailure::WrongProtocol | ConnectFailure::Closed | ConnectFailure::TimedOut => {
            let default_port = if url.starts_with("amqps://") {
                5671
            } else {
                5672
            };
            if let Some(addr) = protocol_probe::host_port(url, default_port) {
                match protocol_probe::identify(&addr, Duration::from_secs(1)).await {
                    Some(server) if server != ServerKind::Amqp => {
                        return Error::connect_failed(
                            redacted,
                            ConnectFailure::WrongProtocol,
                            NotAmqp {
                                advice: server.advice(),
                            },
                        )
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    Error::connect_failed(redacted, failure, err)
}

/// The virtual host of an `amqp://` URL, percent-decoded (`/` when the
/// path is empty, as lapin reads it).
fn vhost_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, hosts)| hosts);
    let path = rest
        .split_once('/')
        .map_or("", |(_, p)| p)
        .split(['?', '#'])
        .next()
        .unwrap_or_default();
    if path.is_empty() {
        return "/".to_owned();
    }
    ezmq_core::spi::option_value::percent_decode(path).unwrap_or_else(|| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_url() {
        assert_eq!(vhost_of("amqp://u:p@h:5672/%2f"), "/");
        assert_eq!(vhost_of("amqp://u:p@h:5672/nosuch?heartbeat=5"), "nosuch");
        assert_eq!(vhost_of("amqp://h:5672"), "/");
    }
}
