//! Heartbeats: telling the broker a long-running job is still alive.

use std::convert::Infallible;
use std::time::Duration;

use crate::backend::Backend;
use crate::job::JobId;

/// Shortest pause between two heartbeats of one job.
const MIN_INTERVAL: Duration = Duration::from_millis(200);

/// Never completes: after `after`, calls [`Backend::working`] for `id`, then
/// again every half retry window the broker reports (at least 200 ms). Stops
/// calling (but stays pending) when the broker reports a zero window, i.e. an
/// at-most-once job that is never redelivered. Errors are logged and retried
/// after `after`. Select it against the work it protects.
pub(crate) async fn keep_alive<B: Backend>(backend: &B, id: &JobId, after: Duration) -> Infallible {
    tokio::time::sleep(after).await;
    loop {
        let pause = match backend.working(id).await {
            Ok(window) if window.is_zero() => {
                tracing::debug!("job is never redelivered; heartbeats stop");
                return std::future::pending().await;
            }
            Ok(window) => {
                tracing::trace!(?window, "heartbeat sent");
                (window / 2).max(MIN_INTERVAL)
            }
            Err(err) => {
                tracing::warn!(cause = %err, "heartbeat failed; the job may be redelivered");
                after.max(MIN_INTERVAL)
            }
        };
        tokio::time::sleep(pause).await;
    }
}
