//! `ezmq cron list`: the crontabs announced by running schedulers.

use ezmq::Client;

use crate::exit::{CliError, CliResult};

/// Runs `ezmq cron list`.
pub(crate) async fn list(client: &Client, _json: bool) -> CliResult<()> {
    Err(CliError::CapabilityMissing {
        backend: super::runtime(client).backend().name(),
        what: "the crontab registry".to_owned(),
        hint: "not implemented yet",
    })
}
