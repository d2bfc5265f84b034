//! `ezmq`: the command line of ezmq. Inspects and operates any broker
//! `ezmq::connect_url` knows (queue stats, peek, push, dead letters, cron,
//! broadcast groups) and runs the embedded Disque-compatible server.

mod args;
mod commands;
mod connect;
mod exit;
mod table;
mod term;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Serve(serve) = cli.command {
        // The server builds its own runtime (its `--threads`).
        return commands::serve::run(serve);
    }
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ezmq: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ezmq: {}", chain(&err));
            err.exit_code()
        }
    }
}

/// `err`, then each cause not already in the text on its own line.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str("\n  caused by: ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// Logs to stderr as `RUST_LOG` says (errors only when it is unset), in
/// colour only when stderr is a terminal and `NO_COLOR` is unset.
///
/// lapin logs a failed connection at ERROR (three lines) that the CLI
/// prints itself, as one error with its causes: its events are off unless
/// `RUST_LOG` names `lapin`.
fn init_tracing() {
    let rust_log = std::env::var("RUST_LOG").unwrap_or_default();
    let mut directives = if rust_log.trim().is_empty() {
        "error".to_owned()
    } else {
        rust_log.clone()
    };
    if !rust_log.contains("lapin") {
        directives.push_str(",lapin=off");
    }
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error,lapin=off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(term::colour(term::stderr_is_terminal()))
        .try_init();
}
