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

    /// A signal that fires on shutdown, or when its own token is
    /// cancelled (CLIENT KILL) without affecting the parent.
    pub(crate) fn child(&self) -> Shutdown {
        Shutdown {
            token: self.token.child_token(),
        }
    }

    /// The token behind this signal.
    pub(crate) fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Completes when shutdown starts.
    pub(crate) async fn recv(&self) {
        self.token.cancelled().await
    }
}
