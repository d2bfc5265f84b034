//! The command line, parsed with clap's derive API.

use std::time::Duration;

use clap::{Parser, Subcommand};
use ezmq_disque_server::cli::ServerArgs;

/// Text printed after `ezmq --help`: URLs and exit codes.
const AFTER_HELP: &str = "\
Broker URLs (--url or EZMQ_URL), the same as ezmq::connect_url:
  disque://[:password@]host:port[,host:port...]   Disque or the embedded server
  redis://[:password@]host:port[/db]              Redis (Streams)
  redis+cluster://host:port,host:port             Redis Cluster
  amqp://user:pass@host:5672/vhost                RabbitMQ

Exit codes:
  0  success
  1  any other failure (the broker refused an operation, bad input)
  2  bad command line or bad URL
  3  the broker is unreachable
  4  the backend lacks a capability the command needs (e.g. peek on RabbitMQ)
  5  purge not confirmed";

/// `ezmq`: inspect and operate any ezmq broker.
#[derive(Debug, Parser)]
#[command(name = "ezmq", version, about, after_help = AFTER_HELP)]
pub(crate) struct Cli {
    /// Broker URL: disque://, redis://, redis+cluster://, amqp://.
    #[arg(long, env = "EZMQ_URL", global = true, hide_env_values = true)]
    pub(crate) url: Option<String>,
    /// Print JSON instead of tables (one document; `--watch` prints one per
    /// refresh, one per line).
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Queue lengths, in-flight jobs and dead letters per topic.
    Stats(StatsArgs),
    /// The topics on the broker: those holding jobs and those live
    /// listeners consume, with their listeners.
    Topics,
    /// The listeners running now in every process, and the crontabs
    /// each process runs (a process that died leaves within 15 s).
    Listeners,
    /// Waiting jobs of a topic, oldest first, without consuming them.
    Peek(PeekArgs),
    /// Pushes one job.
    Push(PushArgs),
    /// Lists, requeues or purges the dead letters of a topic.
    #[command(name = "dead-letters")]
    DeadLetters(DeadLettersArgs),
    /// Distributed cron: the crontabs registered by running schedulers.
    #[command(subcommand)]
    Cron(CronCommand),
    /// Broadcast groups of a topic and their live members.
    Groups(GroupsArgs),
    /// Scheduled jobs (delayed pushes) and retrying ones (waiting for
    /// their backoff) of a topic, the soonest due first.
    Scheduled(ScheduledArgs),
    /// Cancels a job that has not started (scheduled, retrying or
    /// waiting); a running one is left to its handler (exit code 1).
    Cancel(JobArgs),
    /// Makes a scheduled or retrying job due now.
    Promote(JobArgs),
    /// Pauses a topic in every process: its listeners stop taking jobs
    /// within a second (running ones finish); pushes are still accepted.
    Pause(TopicArgs),
    /// Resumes a paused topic.
    Resume(TopicArgs),
    /// Serves the web dashboard for the broker in --url (topics, jobs,
    /// dead letters, crontabs, processes) until Ctrl-C.
    Dashboard(DashboardArgs),
    /// Runs the embedded Disque-compatible server (the flags of
    /// `ezmq-disque-server`).
    Serve(ServeArgs),
}

/// `ezmq dashboard`.
#[derive(Debug, clap::Args)]
pub(crate) struct DashboardArgs {
    /// The address to listen on (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub(crate) listen: std::net::SocketAddr,
    /// Pages only: every action (requeue, purge, cancel, pause) refused.
    #[arg(long)]
    pub(crate) read_only: bool,
    /// Ask for HTTP basic authentication with this `USER:PASSWORD` (better
    /// given in the environment than on the command line).
    #[arg(
        long,
        env = "EZMQ_DASHBOARD_AUTH",
        hide_env_values = true,
        value_name = "USER:PASSWORD"
    )]
    pub(crate) auth: Option<Credential>,
}

/// A `USER:PASSWORD` pair; its `Debug` hides the password.
#[derive(Clone)]
pub(crate) struct Credential {
    pub(crate) user: String,
    pub(crate) password: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:***", self.user)
    }
}

impl std::str::FromStr for Credential {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            Some((user, password)) if !user.is_empty() && !password.is_empty() => Ok(Credential {
                user: user.to_owned(),
                password: password.to_owned(),
            }),
            _ => Err("expected USER:PASSWORD, both non-empty".to_owned()),
        }
    }
}

/// `ezmq stats`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatsArgs {
    /// Topics to show (every topic on the broker, as `ezmq topics` lists
    /// them, without any).
    pub(crate) topics: Vec<String>,
    /// Refresh every INTERVAL (default 2s) until Ctrl-C, redrawing the
    /// table in place on a terminal (one plain frame after another when
    /// piped).
    #[arg(long, value_name = "INTERVAL", num_args = 0..=1,
          default_missing_value = "2s", value_parser = parse_duration)]
    pub(crate) watch: Option<Duration>,
}

/// `ezmq scheduled`.
#[derive(Debug, clap::Args)]
pub(crate) struct ScheduledArgs {
    /// The topic.
    pub(crate) topic: String,
    /// At most this many jobs.
    #[arg(short = 'n', long = "count", default_value_t = 50)]
    pub(crate) count: usize,
}

/// `ezmq pause` and `ezmq resume`.
#[derive(Debug, clap::Args)]
pub(crate) struct TopicArgs {
    /// The topic.
    pub(crate) topic: String,
}

/// `ezmq cancel` and `ezmq promote`.
#[derive(Debug, clap::Args)]
pub(crate) struct JobArgs {
    /// The topic.
    pub(crate) topic: String,
    /// The job's id (what the push printed).
    pub(crate) id: String,
}

/// `ezmq peek`.
#[derive(Debug, clap::Args)]
pub(crate) struct PeekArgs {
    /// The topic.
    pub(crate) topic: String,
    /// How many jobs.
    #[arg(short = 'n', long = "count", default_value_t = 10)]
    pub(crate) count: usize,
}

/// `ezmq push`.
#[derive(Debug, clap::Args)]
pub(crate) struct PushArgs {
    /// The topic.
    pub(crate) topic: String,
    /// The body (use `-` to read it from stdin).
    pub(crate) body: String,
    /// Deliver no earlier than this from now (`10s`, `5m`, `1h 30m`).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) delay: Option<Duration>,
    /// A header `name=value` (repeatable).
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = parse_header)]
    pub(crate) headers: Vec<(String, String)>,
    /// The job's priority: `high`, `normal` (the default) or `low`.
    #[arg(long, value_name = "PRIORITY", value_parser = parse_priority)]
    pub(crate) priority: Option<ezmq::Priority>,
}

/// Parses `high`, `normal` or `low`.
fn parse_priority(s: &str) -> Result<ezmq::Priority, String> {
    s.parse().map_err(|e: ezmq::Error| e.to_string())
}

/// `ezmq dead-letters`.
#[derive(Debug, clap::Args)]
pub(crate) struct DeadLettersArgs {
    /// The topic whose dead letters to show (its dead-letter topic is
    /// `<TOPIC>.dead-letter`, see `--dead-letter-topic`).
    pub(crate) topic: String,
    /// The dead-letter topic, when the listener set its own.
    #[arg(long, value_name = "TOPIC")]
    pub(crate) dead_letter_topic: Option<String>,
    /// Puts the given dead letters (dead-letter job ids or original job
    /// ids) back on their original topic, attempt count reset.
    #[arg(long, value_name = "ID", num_args = 0.., conflicts_with = "purge")]
    pub(crate) requeue: Option<Vec<String>>,
    /// With `--requeue`: every dead letter.
    #[arg(long, requires = "requeue")]
    pub(crate) all: bool,
    /// Deletes every dead letter of the topic.
    #[arg(long)]
    pub(crate) purge: bool,
    /// Do not ask before purging (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
    /// Most dead letters listed.
    #[arg(short = 'n', long = "count", default_value_t = 100)]
    pub(crate) count: usize,
}

/// `ezmq cron ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum CronCommand {
    /// Registered crontabs, their last tick run and their next tick.
    List,
    /// A crontab's most recent runs, newest first: tick, who ran it,
    /// start, duration, outcome, error.
    History(CronHistoryArgs),
}

/// `ezmq cron history`.
#[derive(Debug, clap::Args)]
pub(crate) struct CronHistoryArgs {
    /// The crontab's name.
    pub(crate) name: String,
    /// At most this many runs.
    #[arg(short = 'n', long = "count", default_value_t = 20)]
    pub(crate) count: usize,
}

/// `ezmq groups`.
#[derive(Debug, clap::Args)]
pub(crate) struct GroupsArgs {
    /// The broadcast topic.
    pub(crate) topic: String,
}

/// `ezmq serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// The server's options.
    #[command(flatten)]
    pub(crate) server: ServerArgs,
}

/// `10s`, `250ms`, `1h 30m`, or a bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(text).map_err(|e| format!("{e} (write e.g. 10s, 250ms, 1h30m)"))
}

/// `name=value`.
fn parse_header(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_and_headers_parse() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("soon").is_err());
        assert_eq!(
            parse_header("k=v=w").unwrap(),
            ("k".to_owned(), "v=w".to_owned())
        );
        assert!(parse_header("=v").is_err());
        assert!(parse_header("kv").is_err());
    }

    #[test]
    fn watch_takes_an_optional_interval() {
        let cli = Cli::try_parse_from(["ezmq", "stats", "a", "--watch"]).unwrap();
        let Command::Stats(stats) = cli.command else {
            panic!("not stats")
        };
        assert_eq!(stats.watch, Some(Duration::from_secs(2)));
        let cli = Cli::try_parse_from(["ezmq", "stats", "--watch", "5s", "a", "b"]).unwrap();
        let Command::Stats(stats) = cli.command else {
            panic!("not stats")
        };
        assert_eq!(stats.watch, Some(Duration::from_secs(5)));
        assert_eq!(stats.topics, ["a", "b"]);
    }
}
