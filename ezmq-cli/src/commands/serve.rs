//! `ezmq serve`: the embedded Disque-compatible server, with the flags of
//! `ezmq-disque-server` (its `cli` module). `main` runs it before any
//! runtime exists, since the server builds its own (`--threads`).

use std::process::ExitCode;

use crate::args::ServeArgs;
use crate::exit::{CliError, CliResult};

/// Runs the server until Ctrl-C or SIGTERM.
pub(crate) fn run(args: ServeArgs) -> ExitCode {
    ezmq_disque_server::cli::main(args.server, "ezmq serve")
}

/// `serve` reached the async dispatcher, which never happens: `main` runs
/// it first.
pub(crate) fn unexpected(_: ServeArgs) -> CliResult<()> {
    Err(CliError::Usage(
        "`serve` runs outside the command runtime".to_owned(),
    ))
}
