//! A crontab participant over Disque, for multi-process tests and manual
//! experiments (feature `participant`, off by default).
//!
//! ```text
//! ezmq-cron-participant <addrs> <name> <run-secs> [spec]
//! ```
//!
//! Each argument may instead come from the environment: `EZMQ_CRON_ADDRS`
//! (comma-separated `host:port`), `EZMQ_CRON_NAME`, `EZMQ_CRON_RUN_SECS`,
//! `EZMQ_CRON_SPEC` (default `* * * * * *`). Registers the crontab, runs for
//! `run-secs` seconds, shuts down gracefully and exits. Prints one line
//! `tick <unix secs> <pid>` (flushed) on stdout for every tick it ran;
//! errors go to stderr.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ezmq_core::MqClient;
use ezmq_crontab::CrontabExt;
use ezmq_disque::DisqueConfig;

fn arg(args: &[String], index: usize, env: &str) -> Option<String> {
    args.get(index).cloned().or_else(|| std::env::var(env).ok())
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("ezmq-cron-participant: {problem}");
    eprintln!("usage: ezmq-cron-participant <addrs> <name> <run-secs> [spec]");
    ExitCode::from(2)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(addrs) = arg(&args, 0, "EZMQ_CRON_ADDRS") else {
        return usage("missing addrs");
    };
    let Some(name) = arg(&args, 1, "EZMQ_CRON_NAME") else {
        return usage("missing crontab name");
    };
    let Some(run_secs) = arg(&args, 2, "EZMQ_CRON_RUN_SECS").and_then(|s| s.parse::<f64>().ok())
    else {
        return usage("missing or invalid run-secs");
    };
    let Ok(run_for) = Duration::try_from_secs_f64(run_secs) else {
        return usage("invalid run-secs");
    };
    let spec = arg(&args, 3, "EZMQ_CRON_SPEC").unwrap_or_else(|| "* * * * * *".to_owned());

    let seeds: Vec<String> = addrs
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect();
    let client = match ezmq_disque::connect(DisqueConfig::default().with_seeds(seeds)).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("ezmq-cron-participant: connect: {e}");
            return ExitCode::FAILURE;
        }
    };
    let pid = std::process::id();
    let registered = client
        .add_crontab(&name, &spec, move |tick: DateTime<Utc>| async move {
            let mut out = std::io::stdout().lock();
            writeln!(out, "tick {} {pid}", tick.timestamp())?;
            out.flush()
        })
        .await;
    if let Err(e) = registered {
        eprintln!("ezmq-cron-participant: add_crontab: {e}");
        return ExitCode::FAILURE;
    }
    tokio::time::sleep(run_for).await;
    if let Err(e) = client.shutdown(Duration::from_secs(5)).await {
        eprintln!("ezmq-cron-participant: shutdown: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
