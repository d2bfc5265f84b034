//! A client that dies as a process killed with `kill -9` does.

use std::future::Future;

use ezmq_core::Client;

use crate::Ctx;

/// A client on a Tokio runtime of its own, standing for another process
/// that is killed with `kill -9`: [`Doomed::kill`] drops that runtime with
/// every task and connection of the client at once. Nothing is settled,
/// released or given back; the sockets close, as the kernel closes a
/// killed process's.
#[derive(Debug)]
pub struct Doomed {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Doomed {
    /// Connects a client on a new runtime and runs `setup` with it there
    /// (start its listeners); the client lives until [`Doomed::kill`].
    /// Panics when the runtime or the client cannot start.
    pub async fn start<F, Fut>(ctx: &Ctx, setup: F) -> Doomed
    where
        F: FnOnce(Client) -> Fut + Send + 'static,
        Fut: Future<Output = Client> + Send,
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the doomed client");
        let broker = ctx.broker_handle();
        let (ready, started) = tokio::sync::oneshot::channel();
        runtime.spawn(async move {
            let client = match broker.connect().await {
                Ok(client) => client,
                Err(e) => panic!("connecting the doomed client failed: {e}"),
            };
            let client = setup(client).await;
            let _ = ready.send(());
            // Holds the client until the runtime is dropped.
            std::future::pending::<()>().await;
            drop(client);
        });
        started.await.expect("the doomed client started");
        Doomed {
            runtime: Some(runtime),
        }
    }

    /// Kills the client: its runtime is dropped with everything on it.
    pub fn kill(mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Doomed {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
