//! Shared by the examples: logging, and a broker to talk to.

use ezmq_disque_server::{EmbeddedDisque, ServerConfig};

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

/// The broker the example uses, as a URL for `ezmq::connect_url`: the one
/// in `EZMQ_URL` (`redis://127.0.0.1:6379`, `amqp://guest:guest@127.0.0.1:5672/%2f`,
/// `disque://host:7711,...`), or else an embedded Disque-compatible server
/// started in this process. Keep the returned server alive for as long as
/// the example runs.
pub(crate) async fn broker() -> anyhow::Result<(String, Option<EmbeddedDisque>)> {
    if let Some(url) = std::env::var("EZMQ_URL").ok().filter(|u| !u.is_empty()) {
        tracing::info!(%url, "using the broker from EZMQ_URL");
        return Ok((url, None));
    }
    let server = EmbeddedDisque::start(ServerConfig::default().with_port(0)).await?;
    tracing::info!(addr = %server.addr(), "started the embedded Disque-compatible server");
    Ok((format!("disque://{}", server.addr()), Some(server)))
}
