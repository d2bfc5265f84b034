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
/// [`Error::is_connection_error`], [`Error::is_outcome_unknown`]) for the
/// rest.
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

    /// A payload is larger than the client's configured limit. The message
    /// names the setting that raises it.
    #[error(
        "payload of {size} bytes exceeds the limit of {max} bytes; raise the limit with \
         `max_payload` (URL `?max_payload=16MiB`, `EZMQ_MAX_PAYLOAD`, or \
         `Config::with_max_payload_bytes`)"
    )]
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

    /// The broker refuses new jobs for this queue: an operator closed it
    /// for input (Disque's `PAUSE <queue> in`). Not a paused topic whose
    /// consumers stop: such a topic still takes pushes.
    #[error("queue {topic:?} refuses new jobs (closed for input on the broker)")]
    QueueClosedForInput {
        /// The queue closed for input.
        topic: String,
    },

    /// No broker node could be reached, or it refused the connection. The
    /// message says what happened and what to check; the cause chain has
    /// the client library's details.
    #[error("could not connect to {addrs}: {}", connect_message(*.failure, source))]
    Connect {
        /// The addresses that were tried, comma separated (passwords
        /// redacted).
        addrs: String,
        /// What went wrong.
        failure: ConnectFailure,
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

    /// A push reached the broker (or may have) but its answer never came: it
    /// timed out after it was sent, or the connection was lost before the
    /// broker confirmed it. The job **may have been stored**; this is never
    /// returned for a push the broker refused or that was never sent.
    ///
    /// Pushing it again may store it twice, so [`Error::is_retryable`] is
    /// false. On a backend with
    /// [`Capability::IdempotentPush`](crate::spi::Capability::IdempotentPush),
    /// push again with the same
    /// [`PushOptions::with_message_id`](crate::PushOptions::with_message_id):
    /// a copy the broker already stored makes the second push store nothing.
    #[error("push to topic {topic:?} may or may not have been stored: {source}")]
    OutcomeUnknown {
        /// The push's topic.
        topic: String,
        /// What happened after the push was sent (timeout, lost connection).
        #[source]
        source: BoxError,
    },

    /// A typed payload could not be encoded or decoded as JSON.
    #[error("JSON payload error: {0}")]
    Json(#[from] serde_json::Error),

    /// An operation did not complete within its deadline.
    #[error("timed out after {0:?}")]
    Timeout(Duration),

    /// A request got no reply within its timeout (request-reply).
    #[error("no reply from topic {topic:?} within {after:?}; is a reply listener running for it?")]
    NoReply {
        /// The request's topic.
        topic: String,
        /// The timeout that passed.
        after: Duration,
    },

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

    /// One job of a batch push cannot work (invalid options, too large, a
    /// capability the backend lacks): nothing of the batch was sent.
    #[error("batch push refused, nothing sent: job {index}: {source}")]
    BatchRejected {
        /// The job's position in the batch (0-based).
        index: usize,
        /// Why it cannot work.
        source: Box<Error>,
    },

    /// A push with a unique key
    /// ([`PushOptions::with_unique_key`](crate::PushOptions::with_unique_key))
    /// stored nothing: a job with that key is scheduled, waiting or
    /// running (or the key's ttl has not ended). Not retryable: the same
    /// push is a duplicate again.
    #[error("duplicate push to topic {topic:?}: a job with unique key {key:?} exists{}", existing_text(existing.as_ref()))]
    Duplicate {
        /// The push's topic.
        topic: String,
        /// The unique key.
        key: String,
        /// The id of the job that holds the key, when the broker tells it.
        existing: Option<crate::job::JobId>,
    },

    /// A remote handler (request-reply) answered with an error.
    #[error("remote handler failed: {message}")]
    Remote {
        /// The error message the remote handler produced.
        message: String,
    },
}

/// Why a connection to a broker failed: each kind says what to check, and
/// whether trying again later can help ([`ConnectFailure::is_retryable`]).
///
/// Backends classify from their drivers' error types and codes (I/O error
/// kinds, RESP error codes, AMQP reply codes, the reply to a handshake),
/// never from message text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectFailure {
    /// Nothing listens on the address (connection refused). Retryable: the
    /// broker may be starting.
    Refused,
    /// No answer in time. Retryable.
    TimedOut,
    /// The broker rejected the credentials. Not retryable.
    AuthenticationFailed,
    /// The host name does not resolve. Retryable (DNS entries of a starting
    /// deployment appear late).
    UnknownHost,
    /// The TLS handshake failed. Not retryable.
    Tls,
    /// Something else answers at that address: another broker (the cause
    /// says which, and the URL scheme to use) or a server that does not
    /// speak this backend's protocol. Not retryable.
    WrongProtocol,
    /// The broker answered, but the database or virtual host the URL names
    /// does not exist (or the user may not open it). Not retryable.
    UnknownDatabase,
    /// The connection was closed or reset before the handshake finished.
    /// Retryable: a broker shutting down or starting does this.
    Closed,
    /// Anything else (the cause chain says what). Retryable.
    #[default]
    Other,
}

impl ConnectFailure {
    /// Classifies a connection error by the I/O error kinds in its cause
    /// chain (refused, timed out, closed); anything else is
    /// [`ConnectFailure::Other`]. Backends that know more (an
    /// authentication reply, a handshake answered by another protocol)
    /// say so with [`Error::connect_failed`].
    pub fn classify(err: &(dyn std::error::Error + 'static)) -> Self {
        let mut current = Some(err);
        while let Some(e) = current {
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if let Some(failure) = Self::of_io(io.kind()) {
                    return failure;
                }
            }
            current = e.source();
        }
        ConnectFailure::Other
    }

    /// The failure an I/O error kind stands for, if it is one of those a
    /// connection attempt meets.
    pub fn of_io(kind: std::io::ErrorKind) -> Option<Self> {
        use std::io::ErrorKind as K;
        match kind {
            K::ConnectionRefused => Some(ConnectFailure::Refused),
            K::TimedOut => Some(ConnectFailure::TimedOut),
            K::ConnectionReset | K::ConnectionAborted | K::UnexpectedEof | K::BrokenPipe => {
                Some(ConnectFailure::Closed)
            }
            _ => None,
        }
    }

    /// True when trying again later may succeed: the broker may not be up
    /// yet. False for what only a change of configuration fixes (bad
    /// credentials, TLS, wrong protocol at the port, unknown database or
    /// virtual host): `ezmq::Config`'s connect retry stops at once for
    /// those.
    pub fn is_retryable(self) -> bool {
        !matches!(
            self,
            ConnectFailure::AuthenticationFailed
                | ConnectFailure::Tls
                | ConnectFailure::WrongProtocol
                | ConnectFailure::UnknownDatabase
        )
    }
}

/// The part of a connection error's message after the addresses: what
/// happened and what to check. The cause itself is repeated where it says
/// what the kind cannot ([`ConnectFailure::WrongProtocol`],
/// [`ConnectFailure::UnknownDatabase`], [`ConnectFailure::Other`]);
/// elsewhere it is in the source chain, so `{:#}` prints it once.
fn existing_text(existing: Option<&crate::job::JobId>) -> String {
    existing.map_or_else(String::new, |id| format!(" (job {id})"))
}

fn connect_message(failure: ConnectFailure, source: &BoxError) -> String {
    match failure {
        ConnectFailure::Refused => {
            "connection refused; is the broker running and listening on that address?".into()
        }
        ConnectFailure::TimedOut => {
            "no answer in time; is the address right and reachable from here?".into()
        }
        ConnectFailure::AuthenticationFailed => {
            "authentication failed; check the user name and password in the URL".into()
        }
        ConnectFailure::UnknownHost => "unknown host; check the host name in the URL".into(),
        ConnectFailure::Tls => {
            "TLS handshake failed; check the certificates and the URL scheme".into()
        }
        ConnectFailure::WrongProtocol => {
            format!("wrong protocol at that address: {source}; check the URL's scheme and port")
        }
        ConnectFailure::UnknownDatabase => {
            format!("{source}; check the database or virtual host in the URL")
        }
        ConnectFailure::Closed => {
            "the connection closed during the handshake; is the broker starting or \
             shutting down, or is something else listening there?"
                .into()
        }
        ConnectFailure::Other => source.to_string(),
    }
}

impl Error {
    /// A connection error, classified from the I/O errors in its cause
    /// chain ([`ConnectFailure::classify`]).
    pub fn connect(addrs: impl Into<String>, source: impl Into<BoxError>) -> Self {
        let source = source.into();
        Error::Connect {
            addrs: addrs.into(),
            failure: ConnectFailure::classify(source.as_ref()),
            source,
        }
    }

    /// A connection error the backend classified itself.
    pub fn connect_failed(
        addrs: impl Into<String>,
        failure: ConnectFailure,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Connect {
            addrs: addrs.into(),
            failure,
            source: source.into(),
        }
    }

    /// Wraps a backend error.
    pub fn backend(source: impl Into<BoxError>, retryable: bool) -> Self {
        Error::Backend {
            source: source.into(),
            retryable,
        }
    }

    /// Builds an [`Error::OutcomeUnknown`] for a push to `topic`.
    pub fn outcome_unknown(topic: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::OutcomeUnknown {
            topic: topic.into(),
            source: source.into(),
        }
    }

    /// Builds an [`Error::InvalidOption`].
    pub fn invalid_option(option: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidOption {
            option,
            reason: reason.into(),
        }
    }

    /// True when retrying the same operation later may succeed and cannot
    /// do it twice (not for a connection failure only a configuration
    /// change fixes, [`ConnectFailure::is_retryable`],
    /// and not for [`Error::OutcomeUnknown`]: see
    /// [`Error::is_outcome_unknown`]).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Connect { failure, .. } => failure.is_retryable(),
            Error::Backend { retryable, .. } => *retryable,
            Error::Timeout(_) | Error::NoReply { .. } => true,
            _ => false,
        }
    }

    /// True for [`Error::Timeout`] and [`Error::NoReply`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_) | Error::NoReply { .. })
    }

    /// True for [`Error::OutcomeUnknown`]: a push whose job may or may not
    /// have been stored. Retry it only with the same message id on a backend
    /// that deduplicates pushes
    /// ([`Capability::IdempotentPush`](crate::spi::Capability::IdempotentPush)),
    /// or accept that a retry may deliver it twice.
    ///
    /// ```
    /// use ezmq_core::Error;
    ///
    /// let err = Error::outcome_unknown("orders", "no confirm within 5s");
    /// assert!(err.is_outcome_unknown());
    /// assert!(!err.is_retryable());
    /// assert_eq!(
    ///     err.to_string(),
    ///     "push to topic \"orders\" may or may not have been stored: no confirm within 5s"
    /// );
    /// ```
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, Error::OutcomeUnknown { .. })
    }

    /// The id of the job already holding the key, for
    /// [`Error::Duplicate`].
    ///
    /// ```
    /// use ezmq_core::{Error, JobId};
    ///
    /// let err = Error::Duplicate {
    ///     topic: "mail".into(),
    ///     key: "welcome:42".into(),
    ///     existing: Some(JobId::new("j-1")),
    /// };
    /// assert_eq!(err.duplicate_of().map(JobId::as_str), Some("j-1"));
    /// assert!(!err.is_retryable());
    /// assert_eq!(
    ///     err.to_string(),
    ///     "duplicate push to topic \"mail\": a job with unique key \"welcome:42\" exists (job j-1)"
    /// );
    /// ```
    pub fn duplicate_of(&self) -> Option<&crate::job::JobId> {
        match self {
            Error::Duplicate { existing, .. } => existing.as_ref(),
            _ => None,
        }
    }

    /// True for [`Error::Duplicate`].
    pub fn is_duplicate(&self) -> bool {
        matches!(self, Error::Duplicate { .. })
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
        let e = Error::connect("127.0.0.1:1", io);
        assert!(e.is_connection_error());
        assert!(e.is_retryable());
        assert_eq!(
            e.to_string(),
            "could not connect to 127.0.0.1:1: connection refused; is the broker running and listening on that address?"
        );
        // Message text is never classified: only the I/O kinds, or what
        // the backend says.
        let text = Error::connect("h:1", "ERR invalid password");
        assert!(matches!(
            text,
            Error::Connect {
                failure: ConnectFailure::Other,
                ..
            }
        ));
        let auth = Error::connect_failed(
            "h:1",
            ConnectFailure::AuthenticationFailed,
            "WRONGPASS invalid username-password pair",
        );
        assert!(!auth.is_retryable());
        let wrong = Error::connect_failed(
            "h:1",
            ConnectFailure::WrongProtocol,
            "a Redis server answers there; use a redis:// URL",
        );
        assert!(!wrong.is_retryable());
        assert_eq!(
            wrong.to_string(),
            "could not connect to h:1: wrong protocol at that address: a Redis server answers \
             there; use a redis:// URL; check the URL's scheme and port"
        );
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        let closed = Error::connect("h:1", Error::backend(reset, true));
        assert!(matches!(
            closed,
            Error::Connect {
                failure: ConnectFailure::Closed,
                ..
            }
        ));
        assert!(closed.is_retryable());
        assert!(!Error::Shutdown.is_retryable());
        assert!(Error::Timeout(Duration::from_secs(1)).is_timeout());
        assert!(!Error::backend("bad", false).is_retryable());
    }
}
