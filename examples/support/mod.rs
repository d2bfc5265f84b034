//! Shared by the examples: logging, and a broker to talk to.

use ezmq::server::{EmbeddedDisque, ServerConfig};
use ezmq::DisqueConfig;

/// Logs to stdout at `info` unless `RUST_LOG` says otherwise.
pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
}

/// The broker the example uses: the nodes named by `DISQUE_ADDRS`
/// (comma separated, e.g. a real Disque cluster), or else an embedded
/// Disque-compatible server started in this process. Keep the returned
/// server alive for as long as the example runs.
pub(crate) async fn broker() -> anyhow::Result<(DisqueConfig, Option<EmbeddedDisque>)> {
    if let Ok(addrs) = std::env::var("DISQUE_ADDRS") {
        let seeds: Vec<String> = addrs
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        tracing::info!(?seeds, "using the Disque nodes from DISQUE_ADDRS");
        return Ok((DisqueConfig::default().with_seeds(seeds), None));
    }
    let server = EmbeddedDisque::start(ServerConfig::default().with_port(0)).await?;
    tracing::info!(addr = %server.addr(), "started the embedded Disque-compatible server");
    let config = DisqueConfig::default().with_seeds([server.addr().to_string()]);
    Ok((config, Some(server)))
}
