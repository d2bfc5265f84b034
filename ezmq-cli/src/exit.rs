//! The command's errors and the exit code each maps to.

use std::process::ExitCode;

use ezmq::Error;

/// Exit code of a bad command line or a bad URL.
pub(crate) const BAD_USAGE: u8 = 2;
/// Exit code when the broker cannot be reached.
pub(crate) const UNREACHABLE: u8 = 3;
/// Exit code when the backend lacks a capability the command needs.
pub(crate) const CAPABILITY_MISSING: u8 = 4;
/// Exit code when a purge was not confirmed.
pub(crate) const NOT_CONFIRMED: u8 = 5;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Neither `--url` nor `EZMQ_URL`.
    #[error("no broker URL: pass --url or set EZMQ_URL (e.g. disque://127.0.0.1:7711)")]
    NoUrl,

    /// The URL has no known scheme or does not parse.
    #[error("bad broker URL: {0}")]
    BadUrl(#[source] Error),

    /// Nothing answers at the URL, or it refused us.
    #[error("{0}")]
    Unreachable(#[source] Error),

    /// The backend cannot do what the command needs.
    #[error("capability missing: {what} on the {backend} backend; {hint}")]
    CapabilityMissing {
        /// The backend's name.
        backend: &'static str,
        /// What it lacks.
        what: String,
        /// What to do instead.
        hint: &'static str,
    },

    /// A purge was declined (or could not be asked).
    #[error("{0}")]
    NotConfirmed(&'static str),

    /// The command did part of its work (e.g. some ids were not found).
    #[error("{0}")]
    Incomplete(String),

    /// Bad input that clap could not catch (a topic name, a header).
    #[error("{0}")]
    Usage(String),

    /// What the broker or the client said.
    #[error("{context}: {source}")]
    Ezmq {
        /// What the command was doing.
        context: String,
        /// The error.
        #[source]
        source: Error,
    },

    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// `Result` with [`CliError`].
pub(crate) type CliResult<T> = Result<T, CliError>;

impl CliError {
    /// The process's exit code for this error.
    pub(crate) fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            CliError::NoUrl | CliError::BadUrl(_) | CliError::Usage(_) => BAD_USAGE,
            CliError::Unreachable(_) => UNREACHABLE,
            CliError::CapabilityMissing { .. } => CAPABILITY_MISSING,
            CliError::NotConfirmed(_) => NOT_CONFIRMED,
            CliError::Ezmq { source, .. } => match source {
                Error::Unsupported { .. } => CAPABILITY_MISSING,
                Error::InvalidTopic { .. } | Error::InvalidOption { .. } => BAD_USAGE,
                e if e.is_connection_error() => UNREACHABLE,
                _ => 1,
            },
            CliError::Output(_) | CliError::Incomplete(_) => 1,
        })
    }
}

/// Adds what the command was doing to an ezmq error.
pub(crate) trait Context<T> {
    /// Wraps the error with `context`.
    fn context(self, context: impl FnOnce() -> String) -> CliResult<T>;
}

impl<T> Context<T> for ezmq::Result<T> {
    fn context(self, context: impl FnOnce() -> String) -> CliResult<T> {
        self.map_err(|source| CliError::Ezmq {
            context: context(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ezmq::spi::Capability;

    #[test]
    fn exit_codes_are_distinct() {
        let unsupported = CliError::Ezmq {
            context: "peek".into(),
            source: Error::Unsupported {
                backend: "rabbitmq",
                capability: Capability::Peek,
            },
        };
        assert_eq!(unsupported.exit_code(), ExitCode::from(CAPABILITY_MISSING));
        assert_eq!(CliError::NoUrl.exit_code(), ExitCode::from(BAD_USAGE));
        let refused = Error::connect("127.0.0.1:1", std::io::Error::other("refused"));
        assert_eq!(
            CliError::Unreachable(refused).exit_code(),
            ExitCode::from(UNREACHABLE)
        );
    }
}
