//! `ezmq groups TOPIC`: broadcast groups of a topic and their live members.

use ezmq::Client;

use crate::args::GroupsArgs;
use crate::exit::{CliError, CliResult};

/// Runs `ezmq groups`.
pub(crate) async fn run(client: &Client, args: GroupsArgs, _json: bool) -> CliResult<()> {
    super::topic(&args.topic)?;
    Err(CliError::CapabilityMissing {
        backend: super::runtime(client).backend().name(),
        what: "listing broadcast groups".to_owned(),
        hint: "not implemented yet",
    })
}
