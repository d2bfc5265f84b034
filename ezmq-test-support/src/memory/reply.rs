//! Private reply inboxes on the in-memory broker.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{Inbox, ReplyChannel};
use ezmq_core::Result;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::state::{lock, InboxState};
use super::{Connection, MemoryBackend, MemoryBroker};

#[async_trait]
impl ReplyChannel for MemoryBackend {
    async fn open_inbox(&self) -> Result<Box<dyn Inbox>> {
        self.ensure_open()?;
        let mut state = self.state();
        let address = format!("inbox.{}.{}", self.conn.id, state.next_seq());
        let notify = Arc::new(Notify::new());
        state.inboxes.insert(
            address.clone(),
            InboxState {
                owner: self.conn.id,
                replies: VecDeque::new(),
                notify: Arc::clone(&notify),
            },
        );
        Ok(Box::new(MemoryInbox {
            broker: self.broker.clone(),
            conn: Arc::clone(&self.conn),
            address,
            notify,
        }))
    }

    /// A reply to an inbox that is gone (closed, or its client is) is
    /// dropped, as a broker drops a reply nobody reads.
    async fn send_reply(&self, address: &str, body: Bytes, ttl: Duration) -> Result<()> {
        self.ensure_open()?;
        let mut state = self.state();
        if let Some(inbox) = state.inboxes.get_mut(address) {
            inbox.replies.push_back((body, Instant::now() + ttl));
            inbox.notify.notify_waiters();
        } else {
            tracing::debug!(address, "reply to an inbox that is gone; dropped");
        }
        Ok(())
    }
}

/// An inbox opened by [`MemoryBackend`]'s [`ReplyChannel::open_inbox`].
#[derive(Debug)]
struct MemoryInbox {
    broker: MemoryBroker,
    conn: Arc<Connection>,
    address: String,
    notify: Arc<Notify>,
}

#[async_trait]
impl Inbox for MemoryInbox {
    fn address(&self) -> &str {
        &self.address
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Bytes>> {
        let deadline = Instant::now() + wait;
        loop {
            // Registered before looking, so a reply (or a stop) in
            // between wakes it.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            self.broker.usable(&self.conn)?;
            {
                let now = Instant::now();
                let mut state = lock(&self.broker.state);
                let Some(inbox) = state.inboxes.get_mut(&self.address) else {
                    // Closed: nothing will ever arrive.
                    return Ok(Vec::new());
                };
                let mut replies = Vec::new();
                while replies.len() < max {
                    let Some((body, expires)) = inbox.replies.pop_front() else {
                        break;
                    };
                    if expires > now {
                        replies.push(body);
                    }
                }
                if !replies.is_empty() || now >= deadline {
                    return Ok(replies);
                }
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    async fn close(&self) -> Result<()> {
        lock(&self.broker.state).inboxes.remove(&self.address);
        Ok(())
    }
}
