//! Errors of the RabbitMQ backend, converted into [`ezmq_core::Error`].

use ezmq_core::Error;
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};

/// What went wrong talking to RabbitMQ. Surfaces as the source of an
/// [`Error::Backend`] (or [`Error::Connect`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RabbitError {
    /// An AMQP operation failed.
    #[error("{op} {target:?} failed")]
    Amqp {
        /// The AMQP method or step, e.g. `queue.declare`.
        op: &'static str,
        /// The queue, exchange or URL concerned.
        target: String,
        /// lapin's error.
        #[source]
        source: lapin::Error,
    },
    /// The broker answered a publish with a negative confirm.
    #[error("the broker refused (nack) a message for {target:?}")]
    Nacked {
        /// The queue or exchange.
        target: String,
    },
    /// A mandatory publish could not be routed to any queue.
    #[error("the broker returned a message for {target:?} as unroutable ({code} {text})")]
    Returned {
        /// The queue or exchange.
        target: String,
        /// The AMQP reply code (312 `NO_ROUTE`).
        code: u16,
        /// The reply text.
        text: String,
    },
    /// A name does not fit AMQP's 255-byte short strings.
    #[error("{what} {name:?} is longer than 255 bytes")]
    NameTooLong {
        /// What the name is (queue, header, ...).
        what: &'static str,
        /// The name.
        name: String,
    },
    /// The connection closed while a declaration was under way.
    #[error("declaring {target:?} was cut short: the connection closed")]
    Interrupted {
        /// The queue or exchange.
        target: String,
    },
    /// A consumer's deliveries ended (its channel or connection closed)
    /// before a read was done.
    #[error("reading {target:?} was cut short: its consumer ended")]
    ConsumerEnded {
        /// The queue.
        target: String,
    },
    /// A message was handed to the broker (or may have been) and its
    /// confirm never came: the operation timed out while waiting for it,
    /// or the channel or connection closed first. The broker may or may
    /// not have stored it. Surfaces as
    /// [`Error::OutcomeUnknown`].
    #[error("no publisher confirm for {target:?}: {cause}")]
    Unconfirmed {
        /// The queue or exchange.
        target: String,
        /// Why no confirm came (a timeout, a closed channel).
        #[source]
        cause: Box<RabbitError>,
    },
    /// A keyed claim is held but its holder's token could not be read:
    /// the record of it stayed empty for as long as a read waits (the
    /// holder died between winning and recording its token, or readers in
    /// other processes kept it busy). Retryable.
    #[error("claim {key:?} is held but its holder's token could not be read")]
    HolderUnknown {
        /// The claim's gate queue.
        key: String,
    },
    /// The broker did not answer in time.
    #[error("{op} {target:?} timed out")]
    Timeout {
        /// The operation.
        op: &'static str,
        /// The queue, exchange or URL concerned.
        target: String,
    },
}

impl RabbitError {
    /// Wraps a lapin error with its context.
    pub(crate) fn amqp(op: &'static str, target: impl Into<String>, source: lapin::Error) -> Self {
        RabbitError::Amqp {
            op,
            target: target.into(),
            source,
        }
    }

    /// True when the broker reported the queue or exchange missing.
    pub fn is_not_found(&self) -> bool {
        self.soft_error() == Some(AMQPSoftError::NOTFOUND)
    }

    /// True when an existing queue or exchange has other arguments than
    /// the ones declared.
    pub fn is_precondition_failed(&self) -> bool {
        self.soft_error() == Some(AMQPSoftError::PRECONDITIONFAILED)
    }

    fn soft_error(&self) -> Option<AMQPSoftError> {
        match self {
            RabbitError::Amqp { source, .. } => match source.kind() {
                lapin::ErrorKind::ProtocolError(e) => match e.kind() {
                    AMQPErrorKind::Soft(soft) => Some(soft.clone()),
                    AMQPErrorKind::Hard(_) => None,
                },
                _ => None,
            },
            _ => None,
        }
    }

    /// True when repeating the operation may succeed (connection or
    /// channel lost, broker busy), false for refusals that will repeat and
    /// for [`RabbitError::Unconfirmed`] (repeating it may store the message
    /// twice).
    pub fn is_retryable(&self) -> bool {
        match self {
            RabbitError::Amqp { .. } => !matches!(
                self.soft_error(),
                Some(
                    AMQPSoftError::NOTFOUND
                        | AMQPSoftError::PRECONDITIONFAILED
                        | AMQPSoftError::ACCESSREFUSED
                )
            ),
            RabbitError::Nacked { .. }
            | RabbitError::HolderUnknown { .. }
            | RabbitError::Timeout { .. }
            | RabbitError::Interrupted { .. }
            | RabbitError::ConsumerEnded { .. } => true,
            RabbitError::Returned { .. }
            | RabbitError::NameTooLong { .. }
            | RabbitError::Unconfirmed { .. } => false,
        }
    }
}

impl From<RabbitError> for Error {
    fn from(err: RabbitError) -> Self {
        if let RabbitError::Unconfirmed { target, .. } = &err {
            return Error::outcome_unknown(target.clone(), err);
        }
        let retryable = err.is_retryable();
        Error::backend(err, retryable)
    }
}
