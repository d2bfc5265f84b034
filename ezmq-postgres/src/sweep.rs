//! The sweep: deletes what has expired (jobs past their ttl, message ids
//! past their window, claims, members and groups, unread replies), every
//! sweep interval, in one process at a time (the one that wins the
//! interval's claim).

use std::sync::Weak;

use ezmq_core::Result;
use tokio_util::sync::CancellationToken;

use crate::backend::Inner;

/// The claim a sweep takes for its interval.
const SWEEP_CLAIM: &str = "__ezmq|sweep";

/// Sweeps every interval until `cancel` (or the backend is gone).
pub(crate) async fn run(inner: Weak<Inner>, cancel: CancellationToken) {
    loop {
        let Some(interval) = inner.upgrade().map(|i| i.config.sweep_interval) else {
            return;
        };
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        if let Err(err) = sweep(&inner).await {
            tracing::warn!(error = %err, "postgres sweep failed; trying again next interval");
        }
    }
}

async fn sweep(inner: &Inner) -> Result<()> {
    let token = uuid::Uuid::new_v4().simple().to_string();
    if !inner
        .take_claim(SWEEP_CLAIM, &token, inner.config.sweep_interval)
        .await?
    {
        return Ok(());
    }
    let mut deleted = 0;
    for statement in &inner.sql.sweep {
        deleted += inner
            .timed("sweep", sqlx::query(statement).execute(&inner.pool))
            .await?
            .rows_affected();
    }
    if deleted > 0 {
        tracing::debug!(deleted, "postgres sweep deleted expired rows");
    }
    Ok(())
}
