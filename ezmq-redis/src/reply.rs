//! Request-reply inboxes: a list key per inbox.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{Inbox, ReplyChannel};
use ezmq_core::Result;
use redis::Value;

use crate::backend::{ms_ceil, Inner, RedisBackend};
use crate::codec;
use crate::error::{self, RedisBackendError};
use crate::keys;
use crate::scripts;

/// Longest single `BLPOP` (longer waits loop).
const MAX_BLPOP: Duration = Duration::from_secs(2);

#[async_trait]
impl ReplyChannel for RedisBackend {
    /// A fresh list key `<prefix>:inbox:{<uuid>}`. It exists only while
    /// replies wait in it, and each reply sets its expiry to the reply's
    /// ttl, so the inbox of a client that died disappears by itself.
    async fn open_inbox(&self) -> Result<Box<dyn Inbox>> {
        self.inner.ensure_open()?;
        Ok(Box::new(RedisInbox {
            inner: Arc::clone(&self.inner),
            key: keys::new_inbox(&self.inner.config.key_prefix),
        }))
    }

    /// `RPUSH` and `PEXPIRE ttl` in one script.
    async fn send_reply(&self, address: &str, body: Bytes, ttl: Duration) -> Result<()> {
        self.inner.ensure_open()?;
        if !address.starts_with(&keys::inbox_prefix(&self.inner.config.key_prefix)) {
            return Err(RedisBackendError::BadInboxAddress {
                address: address.to_owned(),
            }
            .into());
        }
        let _: i64 = scripts::SEND_REPLY
            .key(address)
            .arg(body.as_ref())
            .arg(ms_ceil(ttl).max(1))
            .invoke_async(&mut self.inner.conn())
            .await
            .map_err(error::command("send reply script"))?;
        Ok(())
    }
}

/// An open inbox.
struct RedisInbox {
    inner: Arc<Inner>,
    key: String,
}

impl fmt::Debug for RedisInbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisInbox")
            .field("key", &self.key)
            .finish()
    }
}

#[async_trait]
impl Inbox for RedisInbox {
    fn address(&self) -> &str {
        &self.key
    }

    /// `BLPOP` on a dedicated connection, then `LPOP count` for the rest.
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Bytes>> {
        self.inner.ensure_open()?;
        let max = max.max(1);
        let deadline = tokio::time::Instant::now() + wait;
        let mut out = Vec::new();
        loop {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let slice = remaining.min(MAX_BLPOP);
            if slice < Duration::from_millis(1) {
                break;
            }
            let mut cmd = redis::cmd("BLPOP");
            cmd.arg(&self.key)
                .arg(format!("{:.3}", slice.as_secs_f64()));
            let value = self
                .inner
                .blocking("BLPOP", &cmd, slice)
                .await?
                .map_err(error::command("BLPOP"))?;
            if let Value::Array(mut pair) = value {
                if pair.len() == 2 {
                    out.push(Bytes::from(codec::bytes_of(pair.swap_remove(1))?));
                    break;
                }
            }
        }
        if out.len() < max {
            let value: Value = redis::cmd("LPOP")
                .arg(&self.key)
                .arg(max - out.len())
                .query_async(&mut self.inner.conn())
                .await
                .map_err(error::command("LPOP"))?;
            if let Value::Array(items) = value {
                for item in items {
                    out.push(Bytes::from(codec::bytes_of(item)?));
                }
            }
        }
        Ok(out)
    }

    /// Deletes the inbox with the replies left in it.
    async fn close(&self) -> Result<()> {
        let _: Value = redis::cmd("DEL")
            .arg(&self.key)
            .query_async(&mut self.inner.conn())
            .await
            .map_err(error::command("DEL"))?;
        Ok(())
    }
}
