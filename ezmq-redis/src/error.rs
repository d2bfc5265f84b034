//! Errors of the Redis backend and their mapping to [`ezmq_core::Error`].

use std::time::Duration;

use redis::{RedisError, RetryMethod};

/// What can go wrong in the Redis backend beyond a Redis error itself.
/// Carried as the source of [`ezmq_core::Error::Backend`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RedisBackendError {
    /// A Redis command failed.
    #[error("redis {command} failed: {source}")]
    Command {
        /// The command (or script) that failed.
        command: &'static str,
        /// The Redis error.
        #[source]
        source: RedisError,
    },
    /// Redis answered something this backend cannot read.
    #[error("unexpected reply to {command}: {detail}")]
    UnexpectedReply {
        /// The command.
        command: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A blocking command got no answer in time; the connection was
    /// dropped.
    #[error("redis {command} got no reply within {after:?}")]
    NoReply {
        /// The command.
        command: &'static str,
        /// How long it waited.
        after: Duration,
    },
    /// `WAIT` reached fewer replicas than asked.
    #[error("the push reached {reached} replicas of the {wanted} asked within {timeout:?}; it is stored on the primary")]
    TooFewReplicas {
        /// Replicas that acknowledged.
        reached: i64,
        /// Replicas asked for.
        wanted: u32,
        /// The `WAIT` timeout.
        timeout: Duration,
    },
    /// A settle call on a message that is no longer pending for this
    /// consumer group (acknowledged already, or trimmed).
    #[error("stream entry {id} is no longer pending")]
    NotPending {
        /// The stream entry id.
        id: String,
    },
    /// A reply was sent to an address that is not an ezmq inbox.
    #[error("{address:?} is not an ezmq inbox address")]
    BadInboxAddress {
        /// The rejected address.
        address: String,
    },
}

impl RedisBackendError {
    /// Whether repeating the operation later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            RedisBackendError::Command { source, .. } => is_retryable(source),
            RedisBackendError::NoReply { .. } | RedisBackendError::TooFewReplicas { .. } => true,
            RedisBackendError::UnexpectedReply { .. }
            | RedisBackendError::NotPending { .. }
            | RedisBackendError::BadInboxAddress { .. } => false,
        }
    }
}

impl From<RedisBackendError> for ezmq_core::Error {
    fn from(err: RedisBackendError) -> Self {
        let retryable = err.is_retryable();
        ezmq_core::Error::backend(err, retryable)
    }
}

/// True for errors after which the same command may succeed: connection
/// lost or refused, timeouts, a cluster resharding or failing over, a
/// server still loading its data.
pub(crate) fn is_retryable(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_cluster_error()
        || !matches!(err.retry_method(), RetryMethod::NoRetry)
}

/// True when a command failed after it was sent (or may have been): it
/// timed out, or the connection was lost before the reply. Not for a
/// refused connection (nothing was sent) nor an error reply.
pub(crate) fn is_unanswered(err: &RedisError) -> bool {
    (err.is_timeout() || err.is_io_error() || err.is_connection_dropped())
        && !err.is_connection_refusal()
}

/// Wraps a Redis error of a push's `command` that was sent to `topic`:
/// [`ezmq_core::Error::OutcomeUnknown`] when it got no answer
/// ([`is_unanswered`]), else as [`command`] does.
pub(crate) fn push_sent<'a>(
    command: &'static str,
    topic: &'a ezmq_core::Topic,
) -> impl FnOnce(RedisError) -> ezmq_core::Error + 'a {
    move |source| {
        if is_unanswered(&source) {
            ezmq_core::Error::outcome_unknown(
                topic.as_str(),
                RedisBackendError::Command { command, source },
            )
        } else {
            self::command(command)(source)
        }
    }
}

/// True for `NOGROUP` (the consumer group or its stream does not exist).
pub(crate) fn is_no_group(err: &RedisError) -> bool {
    err.code() == Some("NOGROUP")
}

/// Wraps a Redis error of `command` into an [`ezmq_core::Error`].
pub(crate) fn command(command: &'static str) -> impl FnOnce(RedisError) -> ezmq_core::Error {
    move |source| RedisBackendError::Command { command, source }.into()
}

/// An [`RedisBackendError::UnexpectedReply`] as an [`ezmq_core::Error`].
pub(crate) fn unexpected(command: &'static str, detail: impl Into<String>) -> ezmq_core::Error {
    RedisBackendError::UnexpectedReply {
        command,
        detail: detail.into(),
    }
    .into()
}
