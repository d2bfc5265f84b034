//! Shutdown signalling shared by the accept loop and connections.

use tokio_util::sync::CancellationToken;

/// Listens for the server shutdown signal.
#[derive(Debug, Clone)]
pub(crate) struct Shutdown {
    token: CancellationToken,
}

impl Shutdown {
    /// Wraps the server cancellation token.
    pub(crate) fn new(token: CancellationToken) -> Shutdown {
        Shutdown { token }
    }

    /// Completes when shutdown starts.
    pub(crate) async fn recv(&self) {
        self.token.cancelled().await
    }
}
