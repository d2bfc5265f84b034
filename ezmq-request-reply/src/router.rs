//! The caller side: one reply inbox per client instance (opened with the
//! first request), one background receiver that routes replies to the
//! waiting callers by correlation id.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use ezmq_core::spi::{Inbox, Runtime};
use ezmq_core::{Error, Result, Topic};
use tokio::sync::{oneshot, OnceCell};
use tokio_util::sync::CancellationToken;
use tracing::{debug, trace, warn};
use uuid::Uuid;

use crate::envelope::{self, Outcome};
use crate::message::{unix_ms, Reply};
use crate::options::RequestOptions;

/// Replies taken per receive: the receiver's concurrency. Routing a reply
/// is a map lookup and a channel send, so one loop keeps up with many
/// callers.
const REPLY_BATCH: usize = 64;

/// Longest blocking receive on the inbox.
const FETCH_WAIT: Duration = Duration::from_secs(1);

/// Per-client state of the caller side, kept in the runtime's extensions
/// (one per client instance, shared by its clones).
pub(crate) struct ReplyRouter {
    /// The client's shutdown token.
    shutdown: CancellationToken,
    /// Waiting callers by correlation id.
    pending: Mutex<HashMap<Uuid, oneshot::Sender<Outcome>>>,
    /// The inbox's address, once opened (and its receiver started).
    inbox: OnceCell<String>,
}

impl fmt::Debug for ReplyRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyRouter")
            .field("inbox", &self.inbox.get())
            .field("pending", &lock(&self.pending).len())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Removes a caller's pending entry however its request ends (reply,
/// timeout, shutdown, or the caller's future dropped).
struct PendingGuard<'a> {
    router: &'a ReplyRouter,
    id: Uuid,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(&self.router.pending).remove(&self.id);
    }
}

impl ReplyRouter {
    /// The router of the client owning `runtime`, created on first use.
    pub(crate) fn of(runtime: &Runtime) -> Arc<ReplyRouter> {
        runtime.extension(|| ReplyRouter {
            shutdown: runtime.shutdown_token(),
            pending: Mutex::new(HashMap::new()),
            inbox: OnceCell::new(),
        })
    }

    /// Opens the inbox and starts its receiver on the first request;
    /// returns the inbox's address.
    async fn ensure_started(self: &Arc<Self>, runtime: &Runtime) -> Result<&str> {
        let address = self
            .inbox
            .get_or_try_init(|| async {
                runtime.ensure_open()?;
                if self.shutdown.is_cancelled() {
                    return Err(Error::Shutdown);
                }
                let inbox: Arc<dyn Inbox> = Arc::from(runtime.reply_channel()?.open_inbox().await?);
                let address = inbox.address().to_owned();
                // The task holds the inbox and the router, never the
                // client, so dropping the last client clone still stops it.
                runtime.spawn(receive_loop(inbox, Arc::clone(self)));
                debug!(inbox = %address, "reply receiver started");
                Ok::<String, Error>(address)
            })
            .await?;
        Ok(address)
    }

    fn register(&self, id: Uuid, tx: oneshot::Sender<Outcome>) -> Result<PendingGuard<'_>> {
        let mut pending = lock(&self.pending);
        if self.shutdown.is_cancelled() {
            return Err(Error::Shutdown);
        }
        pending.insert(id, tx);
        Ok(PendingGuard { router: self, id })
    }

    /// Sends one request and waits for its reply. Runs inside the request's
    /// span.
    pub(crate) async fn call(
        self: &Arc<Self>,
        runtime: &Runtime,
        topic: &Topic,
        id: Uuid,
        body: Bytes,
        options: &RequestOptions,
    ) -> Result<Reply> {
        let timeout = options.timeout;
        let deadline = SystemTime::now() + timeout;
        let address = self.ensure_started(runtime).await?;
        let push = options
            .push_options()
            .with_headers(envelope::request_headers(id, address, unix_ms(deadline)));
        let (tx, rx) = oneshot::channel();
        // Registered before the push: the reply may come before it returns.
        let _guard = self.register(id, tx)?;
        let exchange = async {
            runtime.publish(topic, body, &push).await?;
            trace!("request sent");
            match rx.await {
                Ok(Outcome::Ok(body)) => Ok(Reply {
                    correlation_id: id,
                    body,
                }),
                Ok(Outcome::Err(message)) => Err(Error::Remote { message }),
                // The receiver stopped: the client is shutting down.
                Err(_) => Err(Error::Shutdown),
            }
        };
        let result = tokio::select! {
            biased;
            () = self.shutdown.cancelled() => Err(Error::Shutdown),
            r = tokio::time::timeout(timeout, exchange) => match r {
                Ok(result) => result,
                Err(_) => {
                    debug!(%topic, ?timeout,
                        "no reply in time; is a reply listener running on this topic?");
                    Err(Error::NoReply {
                        topic: topic.as_str().to_owned(),
                        after: timeout,
                    })
                }
            },
        };
        match &result {
            Ok(_) => trace!("reply received"),
            Err(err) => debug!(cause = %err, "request failed"),
        }
        result
    }

    /// Hands a reply to its caller, if one still waits.
    fn route(&self, msg: &Bytes) {
        match envelope::decode_reply(msg) {
            Ok(reply) => {
                let waiting = lock(&self.pending).remove(&reply.id);
                match waiting {
                    Some(tx) => {
                        // Err: the caller gave up between the lookup and now.
                        let _ = tx.send(reply.outcome);
                    }
                    None => debug!(
                        correlation_id = %reply.id,
                        "late reply dropped (its caller no longer waits)"
                    ),
                }
            }
            Err(err) => warn!(cause = %err, "malformed reply dropped"),
        }
    }

    /// Fails every waiting caller with [`Error::Shutdown`] (their senders are
    /// dropped).
    fn fail_all(&self) {
        let pending = std::mem::take(&mut *lock(&self.pending));
        if !pending.is_empty() {
            debug!(
                callers = pending.len(),
                "reply receiver stopped; failing waiting callers"
            );
        }
    }
}

/// Receives replies until shutdown and routes each; then closes the inbox.
async fn receive_loop(inbox: Arc<dyn Inbox>, router: Arc<ReplyRouter>) {
    let mut failures: u32 = 0;
    loop {
        let received = tokio::select! {
            biased;
            () = router.shutdown.cancelled() => break,
            r = inbox.receive(REPLY_BATCH, FETCH_WAIT) => r,
        };
        match received {
            Ok(replies) => {
                failures = 0;
                for reply in &replies {
                    router.route(reply);
                }
            }
            Err(Error::Shutdown) => break,
            Err(err) => {
                failures = failures.saturating_add(1);
                let wait = Duration::from_millis(50)
                    .saturating_mul(1 << failures.min(6))
                    .min(Duration::from_secs(2));
                warn!(cause = %err, inbox = %inbox.address(), ?wait, "receiving replies failed; retrying");
                tokio::select! {
                    () = router.shutdown.cancelled() => break,
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
    router.fail_all();
    if let Err(err) = inbox.close().await {
        debug!(cause = %err, "could not close the reply inbox");
    }
    debug!(inbox = %inbox.address(), "reply receiver stopped");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router() -> ReplyRouter {
        ReplyRouter {
            shutdown: CancellationToken::new(),
            pending: Mutex::new(HashMap::new()),
            inbox: OnceCell::new(),
        }
    }

    fn reply(id: Uuid, body: &'static [u8]) -> Bytes {
        envelope::encode_reply(id, &Outcome::Ok(Bytes::from_static(body))).unwrap()
    }

    #[test]
    fn replies_go_to_their_own_caller_only() {
        let router = router();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let (tx_a, mut rx_a) = oneshot::channel();
        let (tx_b, mut rx_b) = oneshot::channel();
        let guard_a = router.register(a, tx_a).unwrap();
        let _guard_b = router.register(b, tx_b).unwrap();

        router.route(&reply(Uuid::new_v4(), b"stranger"));
        router.route(&Bytes::from_static(b"garbage"));
        assert!(rx_a.try_recv().is_err() && rx_b.try_recv().is_err());

        router.route(&reply(b, b"for b"));
        assert_eq!(rx_b.try_recv().unwrap(), Outcome::Ok("for b".into()));
        assert!(rx_a.try_recv().is_err());

        // A caller that gave up (guard dropped) no longer gets anything;
        // its late reply is dropped.
        drop(guard_a);
        assert_eq!(lock(&router.pending).len(), 0);
        router.route(&reply(a, b"late"));
    }

    #[test]
    fn shutdown_refuses_and_fails_callers() {
        let router = router();
        let (tx, rx) = oneshot::channel();
        let _guard = router.register(Uuid::new_v4(), tx).unwrap();
        router.shutdown.cancel();
        let (tx2, _rx2) = oneshot::channel();
        assert!(matches!(
            router.register(Uuid::new_v4(), tx2),
            Err(Error::Shutdown)
        ));
        router.fail_all();
        assert!(rx.blocking_recv().is_err());
    }
}
