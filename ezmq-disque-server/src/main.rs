//! `ezmq-disque-server`: a Disque-compatible job queue server.

use clap::Parser;
use ezmq_disque_server::cli::ServerArgs;

/// Command line options.
#[derive(Debug, Parser)]
#[command(
    name = "ezmq-disque-server",
    version,
    about = "Disque-compatible job queue server (single node, or an in-process cluster)"
)]
struct Args {
    #[command(flatten)]
    server: ServerArgs,
}

fn main() -> std::process::ExitCode {
    ezmq_disque_server::cli::main(Args::parse().server, "ezmq-disque-server")
}
