//! The caller side: one reply queue per client instance, one background
//! receiver that routes replies to the waiting callers by correlation id.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use ezmq_core::{Backend, Client, Error, JobId, Result, Topic};
use futures::future::join_all;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, trace, warn};
use uuid::Uuid;

use crate::envelope::{self, Outcome};
use crate::message::{unix_ms, Reply};
use crate::options::RequestOptions;

/// Replies taken per fetch: the receiver's concurrency. Routing a reply is a
/// map lookup and a channel send, so one loop keeps up with many callers.
const REPLY_BATCH: usize = 64;

/// Longest blocking fetch on the reply queue.
const FETCH_WAIT: Duration = Duration::from_secs(1);

/// Most ACKs sent in one concurrent batch.
const ACK_BATCH: usize = 256;

/// Per-client state of the caller side, kept in
/// [`Client::extension`] (one per client instance, shared by its clones).
pub(crate) struct ReplyRouter {
    /// `__ezmq|reply|<uuid v4>`: this client instance's private reply queue.
    topic: Topic,
    /// The client's shutdown token.
    shutdown: CancellationToken,
    /// Waiting callers by correlation id.
    pending: Mutex<HashMap<Uuid, oneshot::Sender<Outcome>>>,
    /// Whether the receiver has been started.
    started: Mutex<bool>,
}

impl fmt::Debug for ReplyRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyRouter")
            .field("topic", &self.topic)
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
    /// The router of `client`, created on first use.
    pub(crate) fn of<B: Backend>(client: &Client<B>) -> Arc<ReplyRouter> {
        client.extension(|| ReplyRouter {
            topic: envelope::reply_topic(Uuid::new_v4()),
            shutdown: client.shutdown_token(),
            pending: Mutex::new(HashMap::new()),
            started: Mutex::new(false),
        })
    }

    /// Starts the receiver on the first request.
    fn ensure_started<B: Backend>(self: &Arc<Self>, client: &Client<B>) -> Result<()> {
        let mut started = lock(&self.started);
        if *started {
            return Ok(());
        }
        client.ensure_open()?;
        if self.shutdown.is_cancelled() {
            return Err(Error::Shutdown);
        }
        let (ack_tx, ack_rx) = mpsc::unbounded_channel();
        // Both tasks hold the backend and the router, never the client, so
        // dropping the last client clone still cancels them.
        client.spawn(receive_loop(
            Arc::clone(client.backend()),
            Arc::clone(self),
            ack_tx,
        ));
        client.spawn(ack_loop(Arc::clone(client.backend()), ack_rx));
        debug!(reply_queue = %self.topic, "reply receiver started");
        *started = true;
        Ok(())
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
    pub(crate) async fn call<B: Backend>(
        self: &Arc<Self>,
        client: &Client<B>,
        topic: &Topic,
        id: Uuid,
        body: Bytes,
        options: &RequestOptions,
    ) -> Result<Reply> {
        let timeout = options.timeout;
        let deadline = SystemTime::now() + timeout;
        self.ensure_started(client)?;
        let msg = envelope::encode_request(id, &self.topic, unix_ms(deadline), &body)?;
        let push = options.push_options();
        let (tx, rx) = oneshot::channel();
        // Registered before the push: the reply may come before it returns.
        let _guard = self.register(id, tx)?;
        let exchange = async {
            client.push_to(topic, msg, &push).await?;
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
            r = tokio::time::timeout(timeout, exchange) => {
                r.unwrap_or(Err(Error::Timeout(timeout)))
            }
        };
        match &result {
            Ok(_) => trace!("reply received"),
            Err(err) => debug!(cause = %err, "request failed"),
        }
        result
    }

    /// Hands a message of the reply queue to its caller, if one still waits.
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
            Err(err) => warn!(cause = %err, reply_queue = %self.topic, "malformed reply dropped"),
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

/// Fetches the reply queue until shutdown; routes each reply, then queues its
/// ACK (reply jobs are acknowledged at once, whatever their fate).
async fn receive_loop<B: Backend>(
    backend: Arc<B>,
    router: Arc<ReplyRouter>,
    acks: mpsc::UnboundedSender<JobId>,
) {
    let mut failures: u32 = 0;
    loop {
        let fetched = tokio::select! {
            biased;
            () = router.shutdown.cancelled() => break,
            r = backend.fetch(&router.topic, REPLY_BATCH, FETCH_WAIT) => r,
        };
        match fetched {
            Ok(jobs) => {
                failures = 0;
                for job in jobs {
                    router.route(job.body());
                    let _ = acks.send(job.id().clone());
                }
            }
            Err(Error::Shutdown) => break,
            Err(err) => {
                failures = failures.saturating_add(1);
                let wait = Duration::from_millis(50)
                    .saturating_mul(1 << failures.min(6))
                    .min(Duration::from_secs(2));
                warn!(cause = %err, reply_queue = %router.topic, ?wait, "fetching replies failed; retrying");
                tokio::select! {
                    () = router.shutdown.cancelled() => break,
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
    router.fail_all();
    debug!(reply_queue = %router.topic, "reply receiver stopped");
}

/// Acknowledges fetched replies, many at once, off the receive path. Ends
/// when the receiver ends, after the last ACKs.
async fn ack_loop<B: Backend>(backend: Arc<B>, mut ids: mpsc::UnboundedReceiver<JobId>) {
    let mut batch = Vec::with_capacity(ACK_BATCH);
    while ids.recv_many(&mut batch, ACK_BATCH).await > 0 {
        let results = join_all(batch.iter().map(|id| backend.ack(id))).await;
        for (id, result) in batch.iter().zip(results) {
            if let Err(err) = result {
                // The reply job expires with its TTL anyway.
                debug!(job_id = %id, cause = %err, "could not ACK a reply");
            }
        }
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router() -> ReplyRouter {
        ReplyRouter {
            topic: envelope::reply_topic(Uuid::new_v4()),
            shutdown: CancellationToken::new(),
            pending: Mutex::new(HashMap::new()),
            started: Mutex::new(false),
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
