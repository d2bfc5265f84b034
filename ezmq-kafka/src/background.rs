//! A background task of the client (the delay mover, the claims reader)
//! that runs until told to stop, owned by the backend and joined at close.

use std::future::Future;
use std::sync::{Mutex, PoisonError};

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A spawned task with its stop signal; dropping it signals the stop
/// (the task then ends by itself, unjoined only when the client was
/// dropped without closing).
pub(crate) struct Background {
    /// What the task is, for the log.
    name: &'static str,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Background {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Background")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Background {
    /// Spawns `run`, which gets the receiver that changes when it should
    /// stop.
    pub(crate) fn spawn<F>(name: &'static str, run: impl FnOnce(watch::Receiver<bool>) -> F) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run(stopped));
        Background {
            name,
            stop,
            task: Mutex::new(Some(task)),
        }
    }

    /// Tells the task to stop and waits for it to end.
    pub(crate) async fn stop(&self) {
        let _ = self.stop.send(true);
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            if let Err(err) = task.await {
                tracing::warn!(task = self.name, error = %err, "a Kafka background task did not end cleanly");
            }
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}
