//! Reply inboxes on core NATS: an inbox is a subscription to a fresh
//! `_INBOX.` subject, and a reply a plain publish to it (the request-reply
//! pattern of NATS itself). Replies are not stored: one sent to an inbox
//! nobody holds any more is dropped, as an expired reply is elsewhere.

use std::fmt;
use std::time::Duration;

use async_nats::Subscriber;
use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{Inbox, ReplyChannel};
use ezmq_core::Result;
use futures::{FutureExt, StreamExt};
use tokio::sync::Mutex;

use crate::backend::NatsBackend;
use crate::error::{self, NatsBackendError};

/// The start of every inbox subject.
const INBOX_PREFIX: &str = "_INBOX.";

/// True when `address` is an inbox subject: the prefix, then letters,
/// digits, `.`, `_` or `-`.
fn is_inbox(address: &str) -> bool {
    address.strip_prefix(INBOX_PREFIX).is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    })
}

#[async_trait]
impl ReplyChannel for NatsBackend {
    async fn open_inbox(&self) -> Result<Box<dyn Inbox>> {
        let inner = &self.inner;
        inner.ensure_open()?;
        let address = inner.client.new_inbox();
        let subscriber = inner
            .timed("open inbox", inner.client.subscribe(address.clone()))
            .await?;
        Ok(Box::new(NatsInbox {
            address,
            subscriber: Mutex::new(subscriber),
        }))
    }

    async fn send_reply(&self, address: &str, body: Bytes, _ttl: Duration) -> Result<()> {
        if !is_inbox(address) {
            return Err(NatsBackendError::BadInboxAddress {
                address: address.to_owned(),
            }
            .into());
        }
        let inner = &self.inner;
        inner
            .timed("send reply", inner.client.publish(address.to_owned(), body))
            .await?;
        inner.timed("send reply", inner.client.flush()).await
    }
}

struct NatsInbox {
    address: String,
    subscriber: Mutex<Subscriber>,
}

impl fmt::Debug for NatsInbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsInbox")
            .field("address", &self.address)
            .finish()
    }
}

#[async_trait]
impl Inbox for NatsInbox {
    fn address(&self) -> &str {
        &self.address
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Bytes>> {
        let mut subscriber = self.subscriber.lock().await;
        let mut got = Vec::new();
        match tokio::time::timeout(wait, subscriber.next()).await {
            Ok(Some(message)) => got.push(message.payload),
            Ok(None) | Err(_) => return Ok(got),
        }
        while got.len() < max.max(1) {
            match subscriber.next().now_or_never() {
                Some(Some(message)) => got.push(message.payload),
                _ => break,
            }
        }
        Ok(got)
    }

    async fn close(&self) -> Result<()> {
        let mut subscriber = self.subscriber.lock().await;
        subscriber
            .unsubscribe()
            .await
            .map_err(error::request("close inbox"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inbox_addresses_are_checked() {
        assert!(is_inbox("_INBOX.abc123"));
        assert!(!is_inbox("_INBOX."));
        assert!(!is_inbox("orders"));
        assert!(!is_inbox("_INBOX.a b"));
    }
}
