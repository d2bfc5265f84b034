//! Errors of the PostgreSQL backend and their mapping to
//! [`ezmq_core::Error`].

use std::time::Duration;

/// What can go wrong in the PostgreSQL backend. Carried as the source of
/// [`ezmq_core::Error::Backend`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PostgresBackendError {
    /// A statement failed.
    #[error("postgres {statement} failed: {source}")]
    Statement {
        /// What the statement does (`push`, `fetch`, `ack`, ...).
        statement: &'static str,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// A statement got no answer within the command timeout.
    #[error("postgres {statement} got no answer within {after:?}")]
    NoReply {
        /// What the statement does.
        statement: &'static str,
        /// How long it waited.
        after: Duration,
    },
    /// The schema is newer than this build knows (another process runs a
    /// later ezmq).
    #[error("schema {schema:?} is at version {found}, newer than this build's {known}; upgrade ezmq-postgres")]
    SchemaTooNew {
        /// The schema.
        schema: String,
        /// Its version.
        found: i32,
        /// The newest this build knows.
        known: i32,
    },
    /// A settle call on a job this delivery no longer holds (settled
    /// already, or its lease ended and another consumer took it).
    #[error("job {id:?} is no longer held by this delivery")]
    NotHeld {
        /// The job id.
        id: String,
    },
    /// The statement of the batch push this job was part of failed (each
    /// job of the batch gets this copy of the error).
    #[error("the batch push this job was part of failed: {detail}")]
    BatchFailed {
        /// The batch's error, with its causes.
        detail: String,
        /// Whether pushing again may succeed.
        retryable: bool,
    },
    /// A reply was sent to an address that is not an ezmq inbox.
    #[error("{address:?} is not an ezmq inbox address")]
    BadInboxAddress {
        /// The rejected address.
        address: String,
    },
}

impl PostgresBackendError {
    /// Whether repeating the operation later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            PostgresBackendError::Statement { source, .. } => is_retryable(source),
            PostgresBackendError::NoReply { .. } => true,
            PostgresBackendError::BatchFailed { retryable, .. } => *retryable,
            PostgresBackendError::SchemaTooNew { .. }
            | PostgresBackendError::NotHeld { .. }
            | PostgresBackendError::BadInboxAddress { .. } => false,
        }
    }
}

impl From<PostgresBackendError> for ezmq_core::Error {
    fn from(err: PostgresBackendError) -> Self {
        let retryable = err.is_retryable();
        ezmq_core::Error::backend(err, retryable)
    }
}

/// A copy of a batch statement's `err` for one job of the batch pushed
/// to `topic` (an unknown outcome stays unknown).
pub(crate) fn batch_copy(err: &ezmq_core::Error, topic: &ezmq_core::Topic) -> ezmq_core::Error {
    // Core's and this backend's messages each include their cause's.
    let detail = err.to_string();
    if err.is_outcome_unknown() {
        ezmq_core::Error::outcome_unknown(
            topic.as_str(),
            PostgresBackendError::BatchFailed {
                detail,
                retryable: false,
            },
        )
    } else {
        PostgresBackendError::BatchFailed {
            detail,
            retryable: err.is_retryable(),
        }
        .into()
    }
}

/// The SQLSTATE of a database error, if it is one.
pub(crate) fn sqlstate(err: &sqlx::Error) -> Option<String> {
    match err {
        sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()),
        _ => None,
    }
}

/// True for errors after which the same statement may succeed: the
/// connection lost or refused, the pool exhausted for a while, the server
/// starting or shutting down, a serialization failure or deadlock.
pub(crate) fn is_retryable(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(_) => sqlstate(err).is_some_and(|code| {
            code.starts_with("08")
                || code.starts_with("57P")
                || matches!(code.as_str(), "40001" | "40P01" | "53300" | "55P03")
        }),
        _ => false,
    }
}

/// True when a statement may have run although its answer never came:
/// the connection broke under it. Not for a pool timeout (nothing was
/// sent) nor an error the server returned.
pub(crate) fn is_unanswered(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed)
        || sqlstate(err).is_some_and(|code| code.starts_with("08") || code.starts_with("57P"))
}

/// Wraps a driver error of `statement`.
pub(crate) fn statement(statement: &'static str) -> impl FnOnce(sqlx::Error) -> ezmq_core::Error {
    move |source| PostgresBackendError::Statement { statement, source }.into()
}

/// Column `index` of a row that `statement` returned, decoded; a value
/// that does not decode is that statement's error.
pub(crate) fn column<'r, T>(
    row: &'r sqlx::postgres::PgRow,
    index: usize,
    statement: &'static str,
) -> ezmq_core::Result<T>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    sqlx::Row::try_get(row, index).map_err(self::statement(statement))
}
