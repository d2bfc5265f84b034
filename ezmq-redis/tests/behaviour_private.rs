//! The shared behaviour suite against a private `redis-server` with
//! `appendonly yes` / `appendfsync always` (started per test when
//! `redis-server` is installed), so the restart case runs: connections
//! drop, confirmed messages survive.

mod support;

use std::time::Duration;

use ezmq_conformance::{behaviour_suite, Broker};
use ezmq_redis::RedisConfig;
use tokio::sync::Mutex;

/// A private, persistent Redis, or the shared URL when `redis-server` is
/// not installed (then the restart case is skipped).
#[derive(Debug)]
struct PrivateRedis {
    url: String,
    process: Option<Mutex<support::RedisProcess>>,
    dir: Option<std::path::PathBuf>,
}

impl PrivateRedis {
    async fn start() -> PrivateRedis {
        if !support::have_redis_server() {
            return PrivateRedis {
                url: support::redis_url(),
                process: None,
                dir: None,
            };
        }
        let dir = support::temp_dir("aof");
        let args = [
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--dir",
            &dir.display().to_string(),
        ]
        .map(str::to_owned);
        let process = support::RedisProcess::start(support::free_port(), &args).await;
        PrivateRedis {
            url: process.url(),
            process: Some(Mutex::new(process)),
            dir: Some(dir),
        }
    }

    fn config(&self) -> RedisConfig {
        RedisConfig::new(self.url.clone()).with_connect_timeout(Duration::from_secs(2))
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        if let Some(process) = self.process.take() {
            drop(process.into_inner());
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[async_trait::async_trait]
impl Broker for PrivateRedis {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn expected_capabilities(&self) -> ezmq_core::spi::Capabilities {
        ezmq_core::spi::Capabilities::all()
    }

    fn url(&self) -> String {
        self.url.clone()
    }

    async fn connect(&self) -> ezmq_core::Result<ezmq_core::Client> {
        ezmq_redis::connect(self.config()).await
    }

    async fn restart(&self) -> Option<Result<(), String>> {
        let process = self.process.as_ref()?;
        process.lock().await.restart().await;
        Some(Ok(()))
    }

    async fn connect_with_short_lease(&self) -> Option<ezmq_core::Result<ezmq_core::Client>> {
        Some(
            ezmq_redis::connect(
                self.config()
                    .with_lease(Duration::from_secs(1))
                    .with_reclaim_interval(Duration::from_millis(100)),
            )
            .await,
        )
    }
}

behaviour_suite!(super::PrivateRedis::start().await);
