//! The error type shared by every ezmq crate and backend.

use std::time::Duration;

/// A boxed error from a backend or a handler, kept as a source so the cause
/// chain survives.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// `Result` with the ezmq [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in ezmq.
///
/// Match on the variants that matter to you and use the classification
/// helpers ([`Error::is_retryable`], [`Error::is_timeout`],
/// [`Error::is_connection_error`]) for the rest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A topic name was rejected before anything was sent.
    #[error("invalid topic {topic:?}: {reason}")]
    InvalidTopic {
        /// The rejected name.
        topic: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// An option (push, consume, client or feature option) has a value that
    /// cannot work.
    #[error("invalid option `{option}`: {reason}")]
    InvalidOption {
        /// The option's name, e.g. `ttl`.
        option: &'static str,
        /// Why the value was rejected.
        reason: String,
    },

    /// A payload is larger than the client's configured limit.
    #[error("payload of {size} bytes exceeds the limit of {max} bytes")]
    PayloadTooLarge {
        /// The payload size in bytes.
        size: usize,
        /// The configured limit in bytes.
        max: usize,
    },

    /// A push with `maxlen` found the queue already at that length.
    #[error("queue {topic:?} is full (maxlen reached)")]
    QueueFull {
        /// The full queue.
        topic: String,
    },

    /// The broker refuses new jobs for this queue (paused for input).
    #[error("queue {topic:?} is paused and refuses new jobs")]
    QueuePaused {
        /// The paused queue.
        topic: String,
    },

    /// No broker node could be reached.
    #[error("could not connect to {addrs}: {source}")]
    Connect {
        /// The addresses that were tried, comma separated.
        addrs: String,
        /// The last connection error.
        #[source]
        source: BoxError,
    },

    /// The broker or the connection to it failed while serving a request.
    #[error("backend error: {source}")]
    Backend {
        /// The backend's own error.
        #[source]
        source: BoxError,
        /// Whether repeating the same request may succeed (connection
        /// dropped, node leaving, replication timeout).
        retryable: bool,
    },

    /// A typed payload could not be encoded or decoded as JSON.
    #[error("JSON payload error: {0}")]
    Json(#[from] serde_json::Error),

    /// An operation did not complete within its deadline.
    #[error("timed out after {0:?}")]
    Timeout(Duration),

    /// The client (or the listener) has been shut down.
    #[error("the client is shut down")]
    Shutdown,

    /// The backend lacks an ability a feature or an option needs. Raised
    /// when the feature is registered (or the option used), never later.
    #[error("the {backend} backend does not support {capability}")]
    Unsupported {
        /// The backend's name (`disque`, `redis`, `rabbitmq`).
        backend: &'static str,
        /// The missing ability.
        capability: crate::spi::Capability,
    },

    /// A remote handler (request-reply) answered with an error.
    #[error("remote handler failed: {message}")]
    Remote {
        /// The error message the remote handler produced.
        message: String,
    },
}

impl Error {
    /// Wraps a backend error.
    pub fn backend(source: impl Into<BoxError>, retryable: bool) -> Self {
        Error::Backend {
            source: source.into(),
            retryable,
        }
    }

    /// Builds an [`Error::InvalidOption`].
    pub fn invalid_option(option: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidOption {
            option,
            reason: reason.into(),
        }
    }

    /// True when retrying the same operation later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Backend {
                retryable: true,
                ..
            } | Error::Connect { .. }
                | Error::Timeout(_)
        )
    }

    /// True for [`Error::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_))
    }

    /// True when no broker could be reached.
    pub fn is_connection_error(&self) -> bool {
        matches!(self, Error::Connect { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_context() {
        let e = Error::InvalidTopic {
            topic: "a b".into(),
            reason: "contains a space",
        };
        assert_eq!(e.to_string(), "invalid topic \"a b\": contains a space");
        let e = Error::invalid_option("ttl", "must be at least 1s");
        assert_eq!(e.to_string(), "invalid option `ttl`: must be at least 1s");
    }

    #[test]
    fn classification() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = Error::Connect {
            addrs: "127.0.0.1:1".into(),
            source: io.into(),
        };
        assert!(e.is_connection_error());
        assert!(e.is_retryable());
        assert!(!Error::Shutdown.is_retryable());
        assert!(Error::Timeout(Duration::from_secs(1)).is_timeout());
        assert!(!Error::backend("bad", false).is_retryable());
    }
}
