//! # ezmq-bench
//!
//! Measures ezmq against the raw commands of each broker, in the same
//! run. Disque: push throughput, consume throughput, push → handler
//! latency (one topic and a mixed 20-topic load), request-reply round
//! trips and the peak RSS under the 128-task push load. Redis, RabbitMQ
//! and PostgreSQL: push and consume throughput and push → handler latency
//! against a raw `redis`-crate / `lapin` / `sqlx` loop. All four: a push
//! batch of 50 (`push_batch`) against the broker's cheapest raw batch.
//! Redis also: the dashboard's overview of 500 topics against a raw read
//! of their counts (`--scenario dashboard`). Prints one markdown table
//! per scenario (see `BENCHMARKS.md` at the repository root).
//!
//! ```text
//! cargo run --release -p ezmq-bench -- [--backend disque|redis|rabbitmq|postgres|nats|kafka]...
//!                                      [--addrs host:port,...] [--server-process]
//!                                      [--smoke] [--scenario NAME] [--metrics-recorder]
//! ```
//!
//! Without `--addrs` or `--server-process` the Disque server is embedded
//! in the bench process (client and server then share the CPU). Redis,
//! RabbitMQ, PostgreSQL, NATS and Kafka are the servers at `--redis-url` /
//! `--amqp-url` / `--postgres-url` / `--nats-url` / `--kafka-url`; one that does
//! not answer is skipped with one line, unless `EZMQ_REQUIRE_BROKERS`
//! names it.

mod brokers;
mod counting;
mod raw;
mod scenario;
mod stats;
mod table;
mod target;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};

use crate::scenario::Settings;
use crate::table::{verdict, Table};
use crate::target::Target;

/// Errors of the bench: anything, with its message.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
/// Result of the bench.
pub(crate) type BoxResult<T> = Result<T, BoxError>;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "ezmq-bench",
    about = "ezmq vs raw broker clients (Disque, Redis, RabbitMQ, PostgreSQL): throughput, latency, request-reply, memory"
)]
struct Args {
    /// Backends to measure (repeatable); default all four. Redis, RabbitMQ
    /// and PostgreSQL are skipped with one line when they do not answer, unless
    /// `EZMQ_REQUIRE_BROKERS` names them (or is `all`).
    #[arg(long, value_enum)]
    backend: Vec<BackendKind>,
    /// The Redis server of the Redis rows.
    #[arg(long, env = "EZMQ_TEST_REDIS_URL", default_value = brokers::redis::DEFAULT_URL)]
    redis_url: String,
    /// The RabbitMQ broker of the RabbitMQ rows.
    #[arg(long, env = "EZMQ_TEST_AMQP_URL", default_value = brokers::rabbitmq::DEFAULT_URL)]
    amqp_url: String,
    /// The PostgreSQL database of the PostgreSQL rows (schema `ezmq`).
    #[arg(long, env = "EZMQ_TEST_POSTGRES_URL", default_value = brokers::postgres::DEFAULT_URL)]
    postgres_url: String,
    /// The NATS server of the NATS rows.
    #[arg(long, env = "EZMQ_TEST_NATS_URL", default_value = brokers::nats::DEFAULT_URL)]
    nats_url: String,
    /// The Kafka broker of the Kafka rows.
    #[arg(long, env = "EZMQ_TEST_KAFKA_URL", default_value = brokers::kafka::DEFAULT_URL)]
    kafka_url: String,
    /// Disque servers to use (`host:port,...`), started separately, e.g. with
    /// `ezmq-disque-server --port 7711`. The first one is used by the raw
    /// baseline. Default: a server embedded in this process.
    #[arg(long, value_delimiter = ',')]
    addrs: Vec<String>,
    /// Start the server as a child process (this binary with `--serve 0`)
    /// so that the client's CPU and memory are measured apart.
    #[arg(long, conflicts_with = "addrs")]
    server_process: bool,
    /// Tiny counts: a few seconds per backend (CI).
    #[arg(long)]
    smoke: bool,
    /// Run only this scenario (repeatable); default all.
    #[arg(long, value_enum)]
    scenario: Vec<Scenario>,
    /// Run only one side (`raw` or `ezmq`), e.g. to profile it; the ratios
    /// are then meaningless.
    #[arg(long, value_enum)]
    only: Option<scenario::Imp>,
    /// Diagnostic: the ezmq push cells call `DisqueBackend::add` directly
    /// (no `MqClient::push`/`push_with`, topic validated once), to split
    /// the cost between ezmq-core and ezmq-disque.
    #[arg(long)]
    push_via_backend: bool,
    /// Installs a `metrics` recorder (Prometheus, as a service would) before
    /// connecting, to measure what ezmq's metrics cost; without it every
    /// metric update is a no-op. Compare the ratios of a run with and one
    /// without.
    #[arg(long)]
    metrics_recorder: bool,
    /// Worker threads of the bench runtime (0 = one per CPU).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Internal: run only the server on this port (the child process of
    /// `--server-process`).
    #[arg(long, hide = true)]
    serve: Option<u16>,
}

/// The backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendKind {
    /// Disque (the embedded server, a child process, or `--addrs`).
    Disque,
    /// Redis Streams (`--redis-url`).
    Redis,
    /// RabbitMQ (`--amqp-url`).
    Rabbitmq,
    /// PostgreSQL (`--postgres-url`).
    Postgres,
    /// NATS JetStream (`--nats-url`).
    Nats,
    /// Kafka (`--kafka-url`).
    Kafka,
}

/// The scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// Push throughput, raw vs `client.push`, 1/16/128 tasks (Disque: also
    /// measures memory).
    Push,
    /// Consume throughput on a pre-filled queue.
    Consume,
    /// Push → handler latency at fixed rates (Disque: and the mixed
    /// 20-topic load).
    Latency,
    /// Request-reply round trips (Disque only).
    Rpc,
    /// Peak RSS under the 128-task push load only (Disque only).
    Memory,
    /// Push batch of 50, raw batch vs `client.push_batch`, 1/16 tasks.
    Batch,
    /// Consume with a rate limit far above the achievable rate vs the
    /// plain listener.
    RateLimit,
    /// Redis only: the dashboard's overview of 500 topics vs a raw read of
    /// their counts.
    Dashboard,
    /// PostgreSQL only: a fetch from a queue of a million jobs vs one of
    /// 100 (20,000 with `--smoke`).
    DeepFetch,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    if args.metrics_recorder {
        // `install_recorder` also starts the upkeep thread that folds the
        // histogram samples into summaries every 5 s, as a service's would.
        if let Err(e) = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder() {
            eprintln!("ezmq-bench: cannot install the metrics recorder: {e}");
            return ExitCode::FAILURE;
        }
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if args.threads > 0 {
        builder.worker_threads(args.threads);
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ezmq-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match args.serve {
        Some(port) => runtime.block_on(target::serve(port)),
        None => runtime.block_on(run(args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut message = format!("ezmq-bench: {e}");
            let mut source = e.source();
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> BoxResult<()> {
    let mut settings = if args.smoke {
        Settings::smoke()
    } else {
        Settings::full()
    };
    settings.push_via_backend = args.push_via_backend;
    if let Some(only) = args.only {
        settings.sides = vec![only];
    }
    let wanted = |s: Scenario| args.scenario.is_empty() || args.scenario.contains(&s);
    let backend = |b: BackendKind| args.backend.is_empty() || args.backend.contains(&b);
    let started = Instant::now();
    println!(
        "# ezmq-bench ({})\n",
        if args.smoke { "smoke" } else { "full" }
    );
    println!(
        "- CPUs: {}, bench runtime threads: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if args.threads == 0 {
            "one per CPU".to_owned()
        } else {
            args.threads.to_string()
        }
    );
    println!(
        "- metrics recorder: {}",
        if args.metrics_recorder {
            "Prometheus (--metrics-recorder)"
        } else {
            "none (every metric update is a no-op)"
        }
    );
    println!("- load average at start: {}\n", load_average());

    let mut goals = Table::new("Goals", &["goal", "measured", "verdict"]);
    if backend(BackendKind::Disque) {
        run_disque(&args, &settings, &wanted, &mut goals).await?;
    }
    let parts = brokers::Parts {
        push: wanted(Scenario::Push),
        consume: wanted(Scenario::Consume),
        latency: wanted(Scenario::Latency),
        batch: wanted(Scenario::Batch),
        rate_limit: wanted(Scenario::RateLimit),
    };
    if backend(BackendKind::Redis) && (parts.any() || wanted(Scenario::Dashboard)) {
        let url = &args.redis_url;
        match brokers::redis::RedisBench::connect(url).await {
            Ok(redis) => {
                println!("## Redis at {url}\n");
                brokers::run(&redis, &settings, parts, &mut goals).await?;
                if wanted(Scenario::Dashboard) {
                    redis.dashboard(&settings, &mut goals).await?;
                }
            }
            Err(e) if brokers::required("redis") => {
                return Err(format!("no broker at {url}: {e}").into())
            }
            Err(_) => println!("skipped: no broker at {url}\n"),
        }
    }
    if backend(BackendKind::Rabbitmq) && parts.any() {
        let url = &args.amqp_url;
        match brokers::rabbitmq::RabbitBench::connect(url).await {
            Ok(rabbit) => {
                println!("## RabbitMQ at {url}\n");
                brokers::run(&rabbit, &settings, parts, &mut goals).await?;
                if parts.latency {
                    // What the quorum queues cost in latency: the same run on
                    // classic queues (no goal).
                    let classic = brokers::Parts {
                        push: false,
                        consume: false,
                        latency: true,
                        batch: false,
                        rate_limit: false,
                    };
                    let rabbit = rabbit.with_classic_queues();
                    brokers::run(&rabbit, &settings, classic, &mut goals).await?;
                }
            }
            Err(e) if brokers::required("rabbitmq") => {
                return Err(format!("no broker at {url}: {e}").into())
            }
            Err(_) => println!("skipped: no broker at {url}\n"),
        }
    }
    if backend(BackendKind::Postgres) && (parts.any() || wanted(Scenario::DeepFetch)) {
        let url = &args.postgres_url;
        match brokers::postgres::PostgresBench::connect(url).await {
            Ok(postgres) => {
                println!("## PostgreSQL at {url}\n");
                brokers::run(&postgres, &settings, parts, &mut goals).await?;
                if wanted(Scenario::DeepFetch) {
                    postgres.deep_fetch(&settings, &mut goals).await?;
                }
            }
            Err(e) if brokers::required("postgres") => {
                return Err(format!("no broker at {url}: {e}").into())
            }
            Err(_) => println!("skipped: no broker at {url}\n"),
        }
    }
    if backend(BackendKind::Nats) && parts.any() {
        let url = &args.nats_url;
        match brokers::nats::NatsBench::connect(url).await {
            Ok(nats) => {
                println!("## NATS JetStream at {url}\n");
                brokers::run(&nats, &settings, parts, &mut goals).await?;
            }
            Err(e) if brokers::required("nats") => {
                return Err(format!("no broker at {url}: {e}").into())
            }
            Err(_) => println!("skipped: no broker at {url}\n"),
        }
    }
    if backend(BackendKind::Kafka) && parts.any() {
        let url = &args.kafka_url;
        match brokers::kafka::KafkaBench::connect(url).await {
            Ok(kafka) => {
                println!("## Kafka at {url}\n");
                brokers::run(&kafka, &settings, parts, &mut goals).await?;
            }
            Err(e) if brokers::required("kafka") => {
                return Err(format!("no broker at {url}: {e}").into())
            }
            Err(_) => println!("skipped: no broker at {url}\n"),
        }
    }
    println!("{}", goals.render());
    println!(
        "- total time: {:.1} s, load average at end: {}",
        started.elapsed().as_secs_f64(),
        load_average()
    );
    Ok(())
}

/// The Disque scenarios.
async fn run_disque(
    args: &Args,
    settings: &Settings,
    wanted: &dyn Fn(Scenario) -> bool,
    goals: &mut Table,
) -> BoxResult<()> {
    let target = if !args.addrs.is_empty() {
        Target::external(args.addrs.clone())
    } else if args.server_process {
        Target::child_process()?
    } else {
        Target::embedded().await?
    };
    println!(
        "## Disque: {} at {}\n",
        target.mode.describe(),
        target.addrs.join(",")
    );
    if wanted(Scenario::Push) || wanted(Scenario::Memory) {
        let only_memory = !wanted(Scenario::Push);
        let (tables, outcome) = scenario::push::run(&target, settings, only_memory).await?;
        for t in tables {
            println!("{}", t.render());
        }
        if !only_memory {
            for (body, r) in outcome.ratios_at_128 {
                goals.row(vec![
                    format!("Disque: push {body} B, 128 tasks: ezmq ≥ 95 % of raw"),
                    format!("{:.0} %", r * 100.0),
                    verdict(r >= scenario::push::GOAL_RATIO),
                ]);
            }
        }
    }
    if wanted(Scenario::Batch) {
        scenario::batch::run(&target, settings, goals).await?;
    }
    if wanted(Scenario::Consume) {
        let (t, r) = scenario::consume::run(&target, settings).await?;
        println!("{}", t.render());
        if settings.sides.len() == 2 {
            goals.row(vec![
                "Disque: consume: listener ≥ 90 % of raw loop".to_owned(),
                format!("{:.0} %", r * 100.0),
                verdict(r >= scenario::consume::GOAL_RATIO),
            ]);
        }
    }
    if wanted(Scenario::RateLimit) {
        let (t, r) = scenario::rate_limit::run(&target, settings).await?;
        println!("{}", t.render());
        goals.row(vec![
            "Disque: consume with a rate limit that does not bite ≥ 85 % of plain".to_owned(),
            format!("{:.0} %", r * 100.0),
            verdict(r >= scenario::rate_limit::GOAL_RATIO),
        ]);
    }
    if wanted(Scenario::Latency) {
        let (tables, p99) = scenario::latency::run(&target, settings).await?;
        for t in tables {
            println!("{}", t.render());
        }
        if let Some(p99) = p99 {
            goals.row(vec![
                "Disque: latency: p99 push → handler < 2 ms at 1k msg/s".to_owned(),
                format!("{} ms", stats::ms(p99)),
                verdict(p99 < Duration::from_millis(2)),
            ]);
        }
    }
    if wanted(Scenario::Rpc) {
        let t = scenario::rpc::run(&target, settings).await?;
        println!("{}", t.render());
    }
    target.shutdown().await;
    Ok(())
}

/// The 1/5/15-minute load averages, or `n/a`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "n/a".to_owned())
}
