//! One module per subcommand; [`run`] dispatches.

mod cron;
mod dashboard;
mod dashboard_demo;
mod dead_letters;
mod groups;
mod jobs;
mod listeners;
mod pause;
mod peek;
mod push;
pub(crate) mod serve;
mod stats;
mod topics;

use ezmq::spi::Capability;
use ezmq::{Client, MqClient, Topic};

use crate::args::{Cli, Command, CronCommand};
use crate::connect::{close, connect};
use crate::exit::{CliError, CliResult};

/// Runs a (non-`serve`) command against the broker in `--url`.
pub(crate) async fn run(cli: Cli) -> CliResult<()> {
    let json = cli.json;
    if let Command::Serve(serve) = cli.command {
        return serve::unexpected(serve);
    }
    if cli.url.is_none() {
        if let Command::Dashboard(args) = cli.command {
            return dashboard::demo(args).await;
        }
    }
    let client = connect(cli.url.as_deref()).await?;
    let result = match cli.command {
        Command::Stats(args) => stats::run(&client, args, json).await,
        Command::Topics => topics::run(&client, json).await,
        Command::Listeners => listeners::run(&client, json).await,
        Command::Peek(args) => peek::run(&client, args, json).await,
        Command::Push(args) => push::run(&client, args, json).await,
        Command::DeadLetters(args) => dead_letters::run(&client, args, json).await,
        Command::Cron(CronCommand::List) => cron::list(&client, json).await,
        Command::Cron(CronCommand::History(args)) => cron::history(&client, args, json).await,
        Command::Groups(args) => groups::run(&client, args, json).await,
        Command::Scheduled(args) => jobs::scheduled(&client, args, json).await,
        Command::Cancel(args) => jobs::cancel(&client, args, json).await,
        Command::Promote(args) => jobs::promote(&client, args, json).await,
        Command::Pause(args) => pause::run(&client, args, true, json).await,
        Command::Resume(args) => pause::run(&client, args, false, json).await,
        Command::Dashboard(args) => dashboard::run(&client, args).await,
        Command::Serve(_) => Ok(()),
    };
    close(&client).await;
    result
}

/// `name` as a topic, or a usage error.
fn topic(name: &str) -> CliResult<Topic> {
    Topic::new(name).map_err(|e| CliError::Usage(e.to_string()))
}

/// Fails with [`CliError::CapabilityMissing`] unless the backend reports
/// `capability`.
fn require(client: &Client, capability: Capability, hint: &'static str) -> CliResult<()> {
    if client.capabilities().has(capability) {
        Ok(())
    } else {
        Err(CliError::CapabilityMissing {
            backend: client.backend_name(),
            what: capability.to_string(),
            hint,
        })
    }
}
