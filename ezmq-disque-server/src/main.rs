//! `ezmq-disque-server`: a Disque-compatible job queue server.

use clap::Parser;
use ezmq_disque_server::{
    AppendFsync, EmbeddedCluster, EmbeddedDisque, ServerConfig, DEFAULT_PORT,
};
use std::io::Write;
use std::net::IpAddr;

/// Command line options.
#[derive(Debug, Parser)]
#[command(
    name = "ezmq-disque-server",
    version,
    about = "Disque-compatible job queue server (single node, or an in-process cluster)"
)]
struct Args {
    /// Run N cluster nodes in this process, on ports P, P+1, ... (with
    /// `--port 0`: any free ports); 0 = a standalone node.
    #[arg(long, default_value_t = 0, conflicts_with = "node_id")]
    cluster: usize,
    /// TCP port to listen on (0 = any free port).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Node ID (40 hex chars); random by default.
    #[arg(long)]
    node_id: Option<String>,
    /// Require clients to AUTH with this password.
    #[arg(long, env = "DISQUE_REQUIREPASS")]
    requirepass: Option<String>,
    /// Maximum number of connected clients.
    #[arg(long, default_value_t = 10_000)]
    maxclients: usize,
    /// Refuse ADDJOB when stored jobs use more than this many bytes (0 = no limit).
    #[arg(long, default_value_t = 0)]
    maxmemory: usize,
    /// Maximum request size in bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    max_request_bytes: usize,
    /// Limit on the input buffered by all clients together, in bytes
    /// (0 = no limit).
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    maxmemory_clients: usize,
    /// Disconnect a client that stops in the middle of a request for this
    /// many seconds (0 = never).
    #[arg(long, default_value_t = 10)]
    request_stall_timeout: u64,
    /// Keep jobs in an append-only file in `--dir` and reload them on start
    /// (standalone only).
    #[arg(long, default_value = "no", value_parser = parse_yes_no, action = clap::ArgAction::Set)]
    appendonly: bool,
    /// Data directory (append-only file, node id).
    #[arg(long, default_value = ".")]
    dir: std::path::PathBuf,
    /// When the append-only file is fsynced: always, everysec or no.
    #[arg(long, default_value_t = AppendFsync::EverySec)]
    appendfsync: AppendFsync,
    /// Tokio worker threads: 0 = one per CPU, 1 = a single-threaded runtime.
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" => Ok(true),
        "no" | "false" | "0" => Ok(false),
        _ => Err(format!("expected yes or no, got {s:?}")),
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
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
        Ok(rt) => rt.block_on(run(args)),
        Err(e) => {
            eprintln!("ezmq-disque-server: cannot start the runtime: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
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
                eprintln!("ezmq-disque-server: {e}");
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
            eprintln!("ezmq-disque-server: {e}");
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
