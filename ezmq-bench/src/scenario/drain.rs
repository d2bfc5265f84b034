//! Timing a listener that drains a pre-filled queue, and the CPU it took
//! per job: what the consume and rate-limit rows share.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ezmq_core::{Client, ConsumeOptions, MqClientExt};
use tokio::sync::Notify;

use crate::BoxResult;

/// Longest a drain may take before the run counts as failed.
pub(crate) const DRAIN_LIMIT: Duration = Duration::from_secs(120);

/// A listener with `options` and a handler that only counts, draining `n`
/// jobs of `queue`: the time from its start until the last handler
/// returned (its ACK still in flight).
pub(crate) async fn listener(
    client: &Client,
    queue: &str,
    n: u64,
    options: ConsumeOptions,
) -> BoxResult<Duration> {
    let handled = Arc::new(AtomicU64::new(0));
    let all_done = Arc::new(Notify::new());
    let (h, d) = (Arc::clone(&handled), Arc::clone(&all_done));
    let start = Instant::now();
    let listener = client
        .add_consume_listener_with(queue, options, move |_job| {
            if h.fetch_add(1, Ordering::Relaxed) + 1 == n {
                d.notify_one();
            }
            async { Ok::<(), Infallible>(()) }
        })
        .await?;
    let finished = tokio::time::timeout(DRAIN_LIMIT, all_done.notified()).await;
    let elapsed = start.elapsed();
    listener.stop(Duration::from_secs(1)).await;
    if finished.is_err() {
        let got = handled.load(Ordering::Relaxed);
        return Err(format!("ezmq consume: only {got} of {n} jobs in {DRAIN_LIMIT:?}").into());
    }
    Ok(elapsed)
}

/// CPU time of the bench process per job between two readings.
pub(crate) fn per_job(
    before: Option<Duration>,
    after: Option<Duration>,
    n: u64,
) -> Option<Duration> {
    let spent = after?.checked_sub(before?)?;
    Some(spent / u32::try_from(n.max(1)).unwrap_or(u32::MAX))
}
