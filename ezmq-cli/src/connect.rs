//! Connecting to the broker the URL names, with the CLI's error mapping.

use std::time::Duration;

use ezmq::{Client, Error, MqClient};

use crate::exit::{CliError, CliResult};

/// How long a command waits for its last acknowledgements when it closes.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Connects to `url` (from `--url` or `EZMQ_URL`), with the settings of
/// its query string (`?prefix=app`) over those of `EZMQ_*` variables, as
/// a service's `ezmq::Config::from_env` reads them: the CLI sees what the
/// service sees.
///
/// A URL or setting that does not parse is [`CliError::BadUrl`]; a broker
/// that does not answer or refuses us is [`CliError::Unreachable`].
pub(crate) async fn connect(url: Option<&str>) -> CliResult<Client> {
    let url = url
        .filter(|u| !u.trim().is_empty())
        .ok_or(CliError::NoUrl)?;
    match ezmq::Config::new(url).with_env().connect().await {
        Ok(client) => Ok(client),
        Err(err @ (Error::InvalidOption { .. } | Error::InvalidTopic { .. })) => {
            Err(CliError::BadUrl(err))
        }
        // Refused, timed out, rejected credentials, TLS: the broker at
        // this URL cannot be used.
        Err(err) => Err(CliError::Unreachable(err)),
    }
}

/// Closes the client's connections, logging (not failing on) an error.
pub(crate) async fn close(client: &Client) {
    if let Err(err) = client.shutdown(CLOSE_GRACE).await {
        tracing::debug!(cause = %err, "closing the client");
    }
}
