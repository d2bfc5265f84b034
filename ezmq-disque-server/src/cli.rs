//! The server's command line (feature `cli`): the options and the
//! `main` of the `ezmq-disque-server` binary, shared with `ezmq serve`.

use std::io::Write;
use std::net::IpAddr;

use crate::{AppendFsync, EmbeddedCluster, EmbeddedDisque, ServerConfig, DEFAULT_PORT};

/// The server's command line options, shared by the `ezmq-disque-server`
/// binary and `ezmq serve` (flatten them into another parser with
/// `#[command(flatten)]`).
#[derive(Clone, Debug, clap::Args)]
pub struct ServerArgs {
    /// Run N cluster nodes in this process, on ports P, P+1, ... (with
    /// `--port 0`: any free ports); 0 = a standalone node.
    #[arg(long, default_value_t = 0, conflicts_with = "node_id")]
    pub cluster: usize,
    /// TCP port to listen on (0 = any free port).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Node ID (40 hex chars); random by default.
    #[arg(long)]
    pub node_id: Option<String>,
    /// Require clients to AUTH with this password.
    #[arg(long, env = "DISQUE_REQUIREPASS")]
    pub requirepass: Option<String>,
    /// Maximum number of connected clients.
    #[arg(long, default_value_t = 10_000)]
    pub maxclients: usize,
    /// Refuse ADDJOB when stored jobs use more than this many bytes (0 = no limit).
    #[arg(long, default_value_t = 0)]
    pub maxmemory: usize,
    /// Maximum request size in bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    pub max_request_bytes: usize,
    /// Limit on the input buffered by all clients together, in bytes
    /// (0 = no limit).
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    pub maxmemory_clients: usize,
    /// Disconnect a client that stops in the middle of a request for this
    /// many seconds (0 = never).
    #[arg(long, default_value_t = 10)]
    pub request_stall_timeout: u64,
    /// Keep jobs in an append-only file in `--dir` and reload them on start
    /// (standalone only).
    #[arg(long, default_value = "no", value_parser = parse_yes_no, action = clap::ArgAction::Set)]
    pub appendonly: bool,
    /// Data directory (append-only file, node id).
    #[arg(long, default_value = ".")]
    pub dir: std::path::PathBuf,
    /// When the append-only file is fsynced: always, everysec or no.
    #[arg(long, default_value_t = AppendFsync::EverySec)]
    pub appendfsync: AppendFsync,
    /// Tokio worker threads: 0 = one per CPU, 1 = a single-threaded runtime.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" => Ok(true),
        "no" | "false" | "0" => Ok(false),
        _ => Err(format!("expected yes or no, got {s:?}")),
    }
}

/// Runs the server until Ctrl-C or SIGTERM: builds the Tokio runtime
/// `args.threads` asks for, logs to stderr (`RUST_LOG`, default `warn`),
/// prints `ready on ADDR node ID` per node on stdout. `program` prefixes
/// error messages.
pub fn main(args: ServerArgs, program: &str) -> std::process::ExitCode {
    let threads = match args.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let runtime = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    };
    match runtime {
        Ok(rt) => rt.block_on(run(args, program)),
        Err(e) => {
            eprintln!("{program}: cannot start the runtime: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Colour in the log only on a terminal, and never with `NO_COLOR` set
/// (to anything but the empty string: <https://no-color.org>).
fn log_colour() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

async fn run(args: ServerArgs, program: &str) -> std::process::ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(log_colour())
        .try_init();
    let mut config = ServerConfig::default()
        .with_bind(args.bind)
        .with_port(args.port)
        .with_requirepass(args.requirepass)
        .with_max_clients(args.maxclients)
        .with_max_memory_bytes(args.maxmemory)
        .with_max_request_bytes(args.max_request_bytes)
        .with_max_query_buffers_bytes(args.maxmemory_clients)
        .with_request_stall_timeout(std::time::Duration::from_secs(args.request_stall_timeout))
        .with_appendonly(args.appendonly)
        .with_dir(args.dir)
        .with_appendfsync(args.appendfsync);
    if let Some(id) = args.node_id {
        config = config.with_node_id(id);
    }
    if args.cluster > 0 {
        let cluster = match EmbeddedCluster::start_with(args.cluster, config).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{program}: {e}");
                return std::process::ExitCode::FAILURE;
            }
        };
        {
            let mut out = std::io::stdout().lock();
            for i in 0..cluster.len() {
                let n = cluster.node(i);
                let _ = writeln!(out, "ready on {} node {}", n.addr, n.node_id);
            }
            let _ = out.flush();
        }
        wait_for_signal().await;
        tracing::info!("shutting down");
        cluster.shutdown().await;
        return std::process::ExitCode::SUCCESS;
    }
    let server = match EmbeddedDisque::start(config).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{program}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "ready on {} node {}", server.addr(), server.node_id());
        let _ = out.flush();
    }
    wait_for_signal().await;
    tracing::info!("shutting down");
    server.shutdown().await;
    std::process::ExitCode::SUCCESS
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
