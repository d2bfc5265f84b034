//! Private reply inboxes: request-reply.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::Result;

/// Private inboxes for replies ([`Capability::RequestReply`](super::Capability::RequestReply)).
#[async_trait]
pub trait ReplyChannel: Send + Sync {
    /// Opens an inbox only this client reads. It disappears (with any reply
    /// left in it) once closed or once its client is gone.
    async fn open_inbox(&self) -> Result<Box<dyn Inbox>>;

    /// Sends `body` to the inbox at `address`; it is dropped unread after
    /// `ttl`.
    async fn send_reply(&self, address: &str, body: Bytes, ttl: Duration) -> Result<()>;
}

/// A private inbox opened by [`ReplyChannel::open_inbox`].
#[async_trait]
pub trait Inbox: Send + Sync + fmt::Debug {
    /// The address repliers send to.
    fn address(&self) -> &str;

    /// Up to `max` replies, waiting up to `wait` for the first one; an
    /// empty vector when none came. Replies are consumed (at most once).
    async fn receive(&self, max: usize, wait: std::time::Duration) -> Result<Vec<Bytes>>;

    /// Closes the inbox.
    async fn close(&self) -> Result<()>;
}
