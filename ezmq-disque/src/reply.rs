//! [`ReplyChannel`] on Disque: private reply inboxes built from queues.
//!
//! - An inbox is a queue `__ezmq|reply|<128 random bits in hex>` that only
//!   its client fetches; the name never collides with a user topic (the
//!   `__ezmq` prefix is reserved).
//! - A reply is an at-most-once job (`RETRY 0 REPLICATE 1`) with a TTL of
//!   the time its caller still waits: never delivered twice, dropped by
//!   the broker once nobody waits for it.
//! - [`Inbox::receive`] takes replies with `GETJOB` and acknowledges them
//!   with the next call (or on close), off the reply's path: an
//!   at-most-once job is never redelivered anyway, the `ACKJOB` only frees
//!   its memory. Disque drops a queue once it is empty, so a closed inbox
//!   leaves nothing behind but replies still in flight, which expire with
//!   their TTL.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{Inbox, ReplyChannel};
use ezmq_core::{
    Error, Job, JobId, PushOptions, Result, Topic, INTERNAL_PREFIX, INTERNAL_SEPARATOR,
};
use tracing::debug;

use crate::backend::DisqueBackend;
use crate::push_options::DisquePushOptions;

/// The kind part of inbox queue names (`__ezmq|reply|<hex>`).
const REPLY_KIND: &str = "reply";

/// Hex digits of an inbox id (128 bits).
const ID_LEN: usize = 32;

#[async_trait]
impl ReplyChannel for DisqueBackend {
    /// A fresh inbox name; nothing is sent to the broker (Disque creates a
    /// queue with its first job).
    async fn open_inbox(&self) -> Result<Box<dyn Inbox>> {
        let queue = Topic::internal(REPLY_KIND, &[&random_id()])?;
        debug!(inbox = %queue, "reply inbox opened");
        Ok(Box::new(DisqueInbox {
            backend: self.clone(),
            queue,
            unacked: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        }))
    }

    /// `ADDJOB <inbox> <body> ... REPLICATE 1 RETRY 0 TTL <ttl>`. Only
    /// addresses of ezmq inboxes are accepted, so a crafted request cannot
    /// make a worker push to an arbitrary queue.
    async fn send_reply(&self, address: &str, body: Bytes, ttl: Duration) -> Result<()> {
        let queue = parse_address(address)?;
        let options = PushOptions::new()
            .with_ttl(ttl.max(Duration::from_secs(1)))
            .with_backend_options(DisquePushOptions::new().with_at_most_once(true));
        self.add(&queue, body, &options).await.map(drop)
    }
}

/// An inbox: the queue, and the replies taken but not yet acknowledged.
#[derive(Debug)]
struct DisqueInbox {
    backend: DisqueBackend,
    queue: Topic,
    unacked: Mutex<Vec<JobId>>,
    closed: AtomicBool,
}

impl DisqueInbox {
    /// Acknowledges the replies taken so far. A failure is only logged:
    /// the replies expire with their TTL anyway.
    async fn ack_taken(&self) {
        let ids = std::mem::take(&mut *self.unacked.lock().unwrap_or_else(PoisonError::into_inner));
        if ids.is_empty() {
            return;
        }
        if let Err(err) = self.backend.ack_many(&ids).await {
            debug!(inbox = %self.queue, replies = ids.len(), cause = %err, "could not ACK replies");
        }
    }
}

#[async_trait]
impl Inbox for DisqueInbox {
    fn address(&self) -> &str {
        self.queue.as_str()
    }

    /// `GETJOB ... FROM <inbox>`, while the previous call's replies are
    /// acknowledged.
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Bytes>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Shutdown);
        }
        let (fetched, ()) =
            futures::future::join(self.backend.fetch(&self.queue, max, wait), self.ack_taken())
                .await;
        let jobs = fetched?;
        if !jobs.is_empty() {
            self.unacked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(jobs.iter().map(|job| job.id().clone()));
        }
        Ok(jobs.into_iter().map(Job::into_body).collect())
    }

    /// Acknowledges the replies taken; later receives fail.
    async fn close(&self) -> Result<()> {
        self.closed.store(true, Ordering::Release);
        self.ack_taken().await;
        debug!(inbox = %self.queue, "reply inbox closed");
        Ok(())
    }
}

/// 128 bits, as 32 lowercase hex digits, unique across processes and
/// hosts: `RandomState` keys come from the operating system's randomness,
/// mixed with the time, the process id and a counter.
fn random_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let half = |salt: u64| {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u64(count);
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        h.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}

/// The queue of an inbox address; only `__ezmq|reply|<32 hex digits>`.
fn parse_address(address: &str) -> Result<Topic> {
    let valid = address
        .strip_prefix(INTERNAL_PREFIX)
        .and_then(|rest| rest.strip_prefix(INTERNAL_SEPARATOR))
        .and_then(|rest| rest.strip_prefix(REPLY_KIND))
        .and_then(|rest| rest.strip_prefix(INTERNAL_SEPARATOR))
        .is_some_and(|id| id.len() == ID_LEN && id.bytes().all(|b| b.is_ascii_hexdigit()));
    if !valid {
        return Err(Error::invalid_option(
            "reply address",
            format!("{address:?} is not an ezmq reply inbox on Disque"),
        ));
    }
    Ok(Topic::from_broker(address.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inbox_names_are_unique_and_accepted() {
        let a = Topic::internal(REPLY_KIND, &[&random_id()]).unwrap();
        let b = Topic::internal(REPLY_KIND, &[&random_id()]).unwrap();
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("__ezmq|reply|"));
        assert_eq!(parse_address(a.as_str()).unwrap(), a);
    }

    #[test]
    fn other_addresses_are_refused() {
        for bad in [
            "orders",
            "__ezmq|bc|t|g",
            "__ezmq|reply|",
            "__ezmq|reply|0123",
            "__ezmq|reply|0123456789abcdef0123456789abcdeg",
            "__ezmq|reply|0123456789abcdef0123456789abcdef|x",
        ] {
            let err = parse_address(bad).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::InvalidOption {
                        option: "reply address",
                        ..
                    }
                ),
                "{bad}: {err}"
            );
        }
    }
}
