//! The Disque server a run talks to: embedded in this process, a child
//! process started by the bench, or external (`--addrs`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ezmq_disque::{DisqueClient, DisqueConfig};
use ezmq_disque_server::{EmbeddedDisque, ServerConfig};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ConnectionAddr, IntoConnectionInfo};

use crate::counting::Counting;
use crate::BoxResult;

/// Time-to-live given to every benchmark job, by ezmq (client default) and
/// by the raw baseline alike. Short, so that jobs a scenario leaves behind
/// do not pile up in the server for long.
pub(crate) const JOB_TTL: Duration = Duration::from_secs(600);

/// How the server runs, as printed in the report header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `EmbeddedDisque` inside the bench process: client and server share
    /// the runtime and the CPU.
    Embedded,
    /// A child process (this binary in `--serve` mode) started by the bench.
    ChildProcess,
    /// A server started by the user, reached through `--addrs`.
    External,
}

impl Mode {
    /// A short description for the report.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Mode::Embedded => "embedded server (same process, RSS includes the server)",
            Mode::ChildProcess => "server in a child process (RSS is client-only)",
            Mode::External => "external server via --addrs (RSS is client-only)",
        }
    }
}

/// The server under test.
#[derive(Debug)]
pub(crate) struct Target {
    /// Seed addresses (`host:port`).
    pub(crate) addrs: Vec<String>,
    /// How the server runs.
    pub(crate) mode: Mode,
    embedded: Option<EmbeddedDisque>,
    child: Option<Child>,
}

impl Target {
    /// Starts an embedded server on `127.0.0.1:0`.
    pub(crate) async fn embedded() -> BoxResult<Self> {
        let server = EmbeddedDisque::start(ServerConfig::default().with_port(0)).await?;
        Ok(Target {
            addrs: vec![server.addr().to_string()],
            mode: Mode::Embedded,
            embedded: Some(server),
            child: None,
        })
    }

    /// Uses servers started elsewhere.
    pub(crate) fn external(addrs: Vec<String>) -> Self {
        Target {
            addrs,
            mode: Mode::External,
            embedded: None,
            child: None,
        }
    }

    /// Starts this binary with `--serve 0` as a child process and waits
    /// for its `ready on ADDR` line.
    pub(crate) fn child_process() -> BoxResult<Self> {
        let exe = std::env::current_exe()?;
        let mut child = Command::new(exe)
            .args(["--serve", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("child has no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let addr = line
            .strip_prefix("ready on ")
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned);
        match addr {
            Some(addr) => Ok(Target {
                addrs: vec![addr],
                mode: Mode::ChildProcess,
                embedded: None,
                child: Some(child),
            }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("server child printed {line:?} instead of its address").into())
            }
        }
    }

    /// A new ezmq client (its own connections).
    pub(crate) async fn ezmq(&self) -> BoxResult<DisqueClient> {
        let config = DisqueConfig::default()
            .with_seeds(self.addrs.clone())
            .with_default_ttl(JOB_TTL);
        Ok(ezmq_disque::connect(config).await?)
    }

    /// A new ezmq client whose backend counts fetches, and that backend.
    pub(crate) async fn ezmq_counting(&self) -> BoxResult<(DisqueClient, Arc<Counting>)> {
        let config = DisqueConfig::default()
            .with_seeds(self.addrs.clone())
            .with_default_ttl(JOB_TTL);
        let backend = ezmq_disque::DisqueBackend::connect(config).await?;
        let counting = Arc::new(Counting::new(backend));
        let client = ezmq_disque::Client::from_backend(
            Arc::clone(&counting) as Arc<dyn ezmq_disque::spi::Backend>,
            ezmq_disque::ClientConfig::default(),
        );
        Ok((client, counting))
    }

    /// A new raw multiplexed (pipelining) connection to the first address.
    pub(crate) async fn raw(&self) -> BoxResult<MultiplexedConnection> {
        let addr = self.addrs.first().ok_or("no server address")?;
        let (host, port) = addr
            .rsplit_once(':')
            .ok_or_else(|| format!("address {addr:?} is not host:port"))?;
        let port: u16 = port.parse()?;
        let info = ConnectionAddr::Tcp(host.to_owned(), port)
            .into_connection_info()?
            .set_redis_settings(redis::RedisConnectionInfo::default().set_skip_set_lib_name());
        let client = Client::open(info)?;
        let config = AsyncConnectionConfig::new().set_response_timeout(None);
        Ok(client
            .get_multiplexed_async_connection_with_config(&config)
            .await?)
    }

    /// Stops a server the bench started.
    pub(crate) async fn shutdown(mut self) {
        if let Some(server) = self.embedded.take() {
            server.shutdown().await;
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Target {
    // A child server must not outlive the bench, even on an error path.
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `--serve PORT`: runs the server in this process until killed (the
/// child-process mode). Prints `ready on ADDR` like `ezmq-disque-server`.
pub(crate) async fn serve(port: u16) -> BoxResult<()> {
    let server = EmbeddedDisque::start(ServerConfig::default().with_port(port)).await?;
    println!("ready on {} node {}", server.addr(), server.node_id());
    std::future::pending::<()>().await;
    Ok(())
}

impl crate::scenario::rate_limit::Subject for Target {
    fn name(&self) -> &'static str {
        "Disque"
    }

    async fn client(&self) -> BoxResult<ezmq_core::Client> {
        self.ezmq().await
    }

    async fn cleanup(&self, queue: &str) -> BoxResult<()> {
        crate::raw::drain(&mut self.raw().await?, queue).await?;
        Ok(())
    }
}
