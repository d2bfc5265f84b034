//! Why connecting to Disque failed, from the error's kind and the Redis
//! client's error kinds and codes (never their text), and what answers
//! at a seed when it is not Disque.

use std::time::Duration;

use ezmq_core::spi::protocol_probe::{self, ServerKind};
use ezmq_core::{ConnectFailure, Error};
use redis::{ErrorKind, RedisError};

use crate::error::DisqueError;

impl DisqueError {
    /// Why a connection attempt that ended with this error failed.
    pub fn connect_failure(&self) -> ConnectFailure {
        match self {
            DisqueError::NotDisque { .. } | DisqueError::UnexpectedReply { .. } => {
                ConnectFailure::WrongProtocol
            }
            DisqueError::Connect { source, .. } | DisqueError::Io { source, .. } => {
                of_redis(source)
            }
            DisqueError::Server { command, code, .. }
                if *command == "AUTH" || code == "NOAUTH" || code == "WRONGPASS" =>
            {
                ConnectFailure::AuthenticationFailed
            }
            DisqueError::Timeout { .. } | DisqueError::NodeDown { .. } => ConnectFailure::TimedOut,
            _ => ConnectFailure::Other,
        }
    }
}

/// The failure a Redis client error of a connection attempt stands for.
fn of_redis(err: &RedisError) -> ConnectFailure {
    if err.kind() == ErrorKind::AuthenticationFailed
        || matches!(err.code(), Some("NOAUTH" | "WRONGPASS"))
    {
        ConnectFailure::AuthenticationFailed
    } else if err.is_connection_refusal() {
        ConnectFailure::Refused
    } else if err.is_timeout() {
        ConnectFailure::TimedOut
    } else if matches!(
        err.kind(),
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType
    ) {
        ConnectFailure::WrongProtocol
    } else if err.is_connection_dropped() || err.is_io_error() {
        ConnectFailure::Closed
    } else {
        ConnectFailure::Other
    }
}

/// The [`Error::Connect`] for `last`, the error of the last seed tried;
/// when a seed answered in another protocol (or hung up, or said nothing
/// in time), what answers there.
pub(crate) async fn connect_error(seeds: &[String], last: DisqueError) -> Error {
    let addrs = seeds.join(",");
    let failure = last.connect_failure();
    if matches!(failure, ConnectFailure::Closed | ConnectFailure::Other) {
        let mut unknown = false;
        for seed in seeds {
            unknown = !protocol_probe::resolves(seed).await;
            if !unknown {
                break;
            }
        }
        if unknown {
            return Error::connect_failed(addrs, ConnectFailure::UnknownHost, last);
        }
    }
    let unclear = !matches!(last, DisqueError::NotDisque { .. })
        && matches!(
            failure,
            ConnectFailure::WrongProtocol | ConnectFailure::Closed | ConnectFailure::TimedOut
        );
    if unclear {
        for seed in seeds {
            match protocol_probe::identify(seed, Duration::from_secs(1)).await {
                Some(server) if server != ServerKind::Resp => {
                    let not_disque = DisqueError::NotDisque {
                        addr: seed.clone(),
                        advice: server.advice(),
                    };
                    return Error::connect_failed(addrs, ConnectFailure::WrongProtocol, not_disque);
                }
                _ => {}
            }
        }
    }
    Error::connect_failed(addrs, failure, last)
}
