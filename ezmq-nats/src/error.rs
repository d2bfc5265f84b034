//! Errors of the NATS backend and their mapping to [`ezmq_core::Error`].

use std::time::Duration;

/// The client library's error, boxed.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What can go wrong in the NATS backend. Carried as the source of
/// [`ezmq_core::Error::Backend`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NatsBackendError {
    /// A request to the server failed.
    #[error("nats {request} failed: {source}")]
    Request {
        /// What the request does (`push`, `fetch`, `ack`, `create stream`, ...).
        request: &'static str,
        /// The client library's error.
        #[source]
        source: BoxError,
        /// Whether repeating it may succeed (the connection was lost, the
        /// server or its stream leader did not answer).
        retryable: bool,
    },
    /// A request got no answer within the command timeout.
    #[error("nats {request} got no answer within {after:?}")]
    NoReply {
        /// What the request does.
        request: &'static str,
        /// How long it waited.
        after: Duration,
    },
    /// The server has no JetStream (started without `-js`, or the
    /// account has none).
    #[error("the NATS server has no JetStream enabled for this account (start it with -js)")]
    NoJetStream,
    /// A reply was sent to an address that is not an ezmq inbox.
    #[error("{address:?} is not an ezmq inbox address")]
    BadInboxAddress {
        /// The rejected address.
        address: String,
    },
}

impl NatsBackendError {
    /// Whether repeating the operation later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            NatsBackendError::Request { retryable, .. } => *retryable,
            NatsBackendError::NoReply { .. } => true,
            NatsBackendError::NoJetStream | NatsBackendError::BadInboxAddress { .. } => false,
        }
    }
}

impl From<NatsBackendError> for ezmq_core::Error {
    fn from(err: NatsBackendError) -> Self {
        let retryable = err.is_retryable();
        ezmq_core::Error::backend(err, retryable)
    }
}

/// Wraps a client error of `request` that may be repeated (a lost
/// connection or leader, a timeout: most of what the client reports).
pub(crate) fn request<E>(request: &'static str) -> impl FnOnce(E) -> ezmq_core::Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    move |source| {
        NatsBackendError::Request {
            request,
            source: Box::new(source),
            retryable: true,
        }
        .into()
    }
}

/// Wraps a client error of `request` that repeating will not mend (the
/// server refused a configuration, say).
pub(crate) fn refused<E>(request: &'static str) -> impl FnOnce(E) -> ezmq_core::Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    move |source| {
        NatsBackendError::Request {
            request,
            source: Box::new(source),
            retryable: false,
        }
        .into()
    }
}

/// [`request`] for the client's boxed errors (`async_nats::Error`).
pub(crate) fn boxed(request: &'static str) -> impl FnOnce(BoxError) -> ezmq_core::Error {
    move |source| {
        NatsBackendError::Request {
            request,
            source,
            retryable: true,
        }
        .into()
    }
}
