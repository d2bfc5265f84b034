//! Errors of the Disque backend, converted into [`ezmq_core::Error`] at the
//! API boundary.

use std::time::Duration;

/// What went wrong talking to Disque. Public APIs return
/// [`ezmq_core::Error`]; this enum is its `source` (reach it with
/// `downcast_ref`), and is returned directly by config parsing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DisqueError {
    /// A `disque://` URL could not be parsed (the password is redacted).
    #[error("invalid Disque URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL, password redacted.
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A node address is not `host:port`.
    #[error("invalid address {addr:?}: {reason}")]
    InvalidAddress {
        /// The address.
        addr: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A configuration value cannot work.
    #[error("invalid Disque option `{option}`: {reason}")]
    InvalidConfig {
        /// The option's name.
        option: &'static str,
        /// Why it was rejected.
        reason: String,
    },

    /// A cluster-wide read (queue length, peek) could not read one node, so
    /// its answer would be partial.
    #[error("could not read every Disque node; the answer would be partial")]
    Partial(#[source] Box<DisqueError>),

    /// Opening a connection (TCP, then `AUTH`) to a node failed, or the
    /// node's connection had already failed: nothing was sent.
    #[error("connecting to Disque node {addr} failed: {source}")]
    Connect {
        /// The node's address.
        addr: String,
        /// The client library's error.
        #[source]
        source: redis::RedisError,
    },

    /// A command failed on the connection (I/O, protocol).
    #[error("{command} on Disque node {addr} failed: {source}")]
    Io {
        /// The command, e.g. `ADDJOB`.
        command: &'static str,
        /// The node's address.
        addr: String,
        /// The client library's error.
        #[source]
        source: redis::RedisError,
    },

    /// The server answered with an error reply, e.g. `-NOREPL ...`.
    #[error("{command} on Disque node {addr} refused: {code} {message}")]
    Server {
        /// The command, e.g. `ADDJOB`.
        command: &'static str,
        /// The node's address.
        addr: String,
        /// The error code, the first word of the reply (`MAXLEN`, `NOREPL`,
        /// `LEAVING`, `ERR`, ...).
        code: String,
        /// The rest of the reply.
        message: String,
    },

    /// No reply came in time.
    #[error("{command} on Disque node {addr} got no reply within {after:?}")]
    Timeout {
        /// The command.
        command: &'static str,
        /// The node's address.
        addr: String,
        /// The deadline that passed.
        after: Duration,
    },

    /// The node was found hung or unreachable while the command waited on
    /// it (see [`DisqueConfig::hang_timeout`](crate::DisqueConfig::hang_timeout)).
    #[error(
        "{command} on Disque node {addr} abandoned: the node does not answer (hung or unreachable)"
    )]
    NodeDown {
        /// The command.
        command: &'static str,
        /// The node's address.
        addr: String,
    },

    /// The reply did not have the shape the command documents.
    #[error("unexpected reply to {command} from Disque node {addr}: {reply}")]
    UnexpectedReply {
        /// The command.
        command: &'static str,
        /// The node's address.
        addr: String,
        /// The reply, abbreviated.
        reply: String,
    },

    /// Something other than Disque answers at a seed: Redis (its `HELLO`
    /// is another), RabbitMQ, ... The advice names the URL scheme to use.
    #[error("the server at {addr} is not Disque: {advice}")]
    NotDisque {
        /// The seed's address.
        addr: String,
        /// What answers there, and what to use instead.
        advice: &'static str,
    },

    /// The node table is empty (every node left).
    #[error("no Disque node is known")]
    NoNodes,

    /// A job-store scan that concurrent callers shared failed (the first
    /// caller's error, given to each of them).
    #[error(transparent)]
    Shared(std::sync::Arc<DisqueError>),

    /// A job-control call (cancel, promote, reschedule) could not finish
    /// safely; nothing unsafe was done unless `reason` says so.
    #[error("job {job} of topic {topic}: {reason}")]
    JobControl {
        /// The topic.
        topic: String,
        /// The job's id.
        job: String,
        /// What happened.
        reason: &'static str,
        /// Whether calling again may succeed.
        retryable: bool,
    },

    /// An `ADDJOB` was sent to a node that still answers but its reply did
    /// not come in time (see [`DisqueError::may_have_run`]): the job may
    /// have been stored, so it is not sent to another node. Public APIs return it as
    /// [`ezmq_core::Error::OutcomeUnknown`].
    #[error("{0}; the job may have been stored")]
    OutcomeUnknown(#[source] Box<DisqueError>),
}

impl DisqueError {
    /// True when the same request may succeed later or on another node:
    /// connection problems, timeouts, `-NOREPL`, `-LEAVING`.
    pub fn is_retryable(&self) -> bool {
        match self {
            DisqueError::Connect { .. }
            | DisqueError::Io { .. }
            | DisqueError::Timeout { .. }
            | DisqueError::NodeDown { .. }
            | DisqueError::NoNodes => true,
            DisqueError::Server { code, .. } => code == "NOREPL" || code == "LEAVING",
            DisqueError::Partial(_) => true,
            DisqueError::Shared(inner) => inner.is_retryable(),
            DisqueError::JobControl { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// True when the node should be given up for this request and the next
    /// one tried: connection problems, timeouts, `-LEAVING`.
    pub fn is_failover(&self) -> bool {
        match self {
            DisqueError::Connect { .. }
            | DisqueError::Io { .. }
            | DisqueError::Timeout { .. }
            | DisqueError::NodeDown { .. } => true,
            DisqueError::Server { code, .. } => code == "LEAVING",
            _ => false,
        }
    }

    /// True when the command was sent to a node that still answers but its
    /// reply did not come in time: the node may still carry it out.
    ///
    /// False for a command never sent ([`DisqueError::Connect`]), for any
    /// reply (error replies included), for a connection the node closed or
    /// reset ([`DisqueError::Io`]: the node died or dropped the client), and
    /// for a node found hung ([`DisqueError::NodeDown`]): the client closes
    /// its connections to a hung node, and a Disque node that finds the
    /// client of a synchronously replicated `ADDJOB` gone deletes the job
    /// from the cluster (Disque's `unblockClientWaitingJobRepl`), so the
    /// copy it held does not survive once it goes on.
    pub fn may_have_run(&self) -> bool {
        matches!(
            self,
            DisqueError::Timeout { .. } | DisqueError::OutcomeUnknown(_)
        )
    }

    /// The error code of a server error reply (`MAXLEN`, `PAUSED`, ...).
    pub fn server_code(&self) -> Option<&str> {
        match self {
            DisqueError::Server { code, .. } => Some(code),
            _ => None,
        }
    }
}

impl From<DisqueError> for ezmq_core::Error {
    fn from(err: DisqueError) -> Self {
        match err {
            DisqueError::InvalidUrl { .. } => {
                ezmq_core::Error::invalid_option("url", err.to_string())
            }
            DisqueError::InvalidAddress { .. } => {
                ezmq_core::Error::invalid_option("seeds", err.to_string())
            }
            DisqueError::InvalidConfig { option, ref reason } => {
                ezmq_core::Error::invalid_option(option, reason.clone())
            }
            other => {
                let retryable = other.is_retryable();
                ezmq_core::Error::backend(other, retryable)
            }
        }
    }
}

/// Classifies a client-library error of `command` on `addr`.
pub(crate) fn from_redis(command: &'static str, addr: &str, err: redis::RedisError) -> DisqueError {
    if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
        return DisqueError::Io {
            command,
            addr: addr.to_owned(),
            source: err,
        };
    }
    if err.is_timeout() {
        return DisqueError::Timeout {
            command,
            addr: addr.to_owned(),
            after: Duration::ZERO,
        };
    }
    match err.code() {
        Some(code) => DisqueError::Server {
            command,
            addr: addr.to_owned(),
            code: code.to_owned(),
            message: err.detail().unwrap_or_default().to_owned(),
        },
        None => DisqueError::Io {
            command,
            addr: addr.to_owned(),
            source: err,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: &str) -> DisqueError {
        DisqueError::Server {
            command: "ADDJOB",
            addr: "a:1".into(),
            code: code.into(),
            message: "text".into(),
        }
    }

    #[test]
    fn classification() {
        assert!(server("NOREPL").is_retryable());
        assert!(server("LEAVING").is_retryable());
        assert!(server("LEAVING").is_failover());
        assert!(!server("NOREPL").is_failover());
        assert!(!server("ERR").is_retryable());
        let e: ezmq_core::Error = server("ERR").into();
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("backend"), "{e}");
        let src = std::error::Error::source(&e)
            .map(|s| s.to_string())
            .unwrap_or_default();
        assert_eq!(src, "ADDJOB on Disque node a:1 refused: ERR text");
    }
}
