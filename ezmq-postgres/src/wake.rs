//! Waking waiting listeners: one `LISTEN` connection per backend, and a
//! counter per queue that every notification for it moves on.
//!
//! A waiting [`receive`](crate::receive) subscribes to its queue before it
//! fetches, so a notification sent between its fetch and its wait is not
//! missed. When the `LISTEN` connection drops, notifications sent until
//! it is back are lost: every queue is woken once it is, and a waiter
//! never sleeps longer than the poll interval anyway.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The queues waiters of this backend wait on.
#[derive(Debug, Default)]
pub(crate) struct Wakes {
    queues: Mutex<HashMap<String, watch::Sender<u64>>>,
}

impl Wakes {
    /// A receiver that changes once a notification for `queue` comes.
    pub(crate) fn subscribe(&self, queue: &str) -> watch::Receiver<u64> {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        match queues.get(queue) {
            Some(sender) => sender.subscribe(),
            None => {
                let (sender, receiver) = watch::channel(0);
                queues.insert(queue.to_owned(), sender);
                receiver
            }
        }
    }

    /// Wakes the waiters of `queue`.
    pub(crate) fn wake(&self, queue: &str) {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = queues.get(queue) {
            sender.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Wakes every waiter (notifications may have been lost).
    pub(crate) fn wake_all(&self) {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        for sender in queues.values() {
            sender.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

/// Waits until `woken` changes (a notification came) or `until`,
/// whichever is first.
pub(crate) async fn wait(woken: &mut watch::Receiver<u64>, until: tokio::time::Instant) {
    tokio::select! {
        changed = woken.changed() => {
            if changed.is_err() {
                tokio::time::sleep_until(until).await;
            }
        }
        () = tokio::time::sleep_until(until) => {}
    }
}

/// Listens on `channel` until `cancel`, waking the queues notifications
/// name. Reconnects (pausing up to 1 s between tries) when the connection
/// is lost.
pub(crate) async fn listen(
    pool: PgPool,
    channel: String,
    wakes: Arc<Wakes>,
    cancel: CancellationToken,
) {
    let mut pause = Duration::from_millis(50);
    loop {
        let connected = tokio::select! {
            () = cancel.cancelled() => return,
            listener = connect(&pool, &channel) => listener,
        };
        let mut listener = match connected {
            Ok(listener) => listener,
            Err(err) => {
                tracing::warn!(%channel, error = %err, retry_in = ?pause, "postgres LISTEN failed; retrying");
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        pause = Duration::from_millis(50);
        // Whatever was sent while nobody listened.
        wakes.wake_all();
        loop {
            let next = tokio::select! {
                () = cancel.cancelled() => return,
                next = listener.try_recv() => next,
            };
            match next {
                Ok(Some(notification)) => wakes.wake(notification.payload()),
                Ok(None) => {
                    tracing::debug!(%channel, "postgres LISTEN connection lost; reconnecting");
                    break;
                }
                Err(err) => {
                    tracing::warn!(%channel, error = %err, "postgres LISTEN failed; reconnecting");
                    break;
                }
            }
        }
    }
}

async fn connect(pool: &PgPool, channel: &str) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    // Reconnects are this loop's, so that every queue is woken after one.
    listener.ignore_pool_close_event(true);
    listener.listen(channel).await?;
    Ok(listener)
}
