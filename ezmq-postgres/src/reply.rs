//! Reply inboxes: a queue per inbox (`__ezmq|inbox|<random id>`) whose
//! rows are taken with `DELETE … RETURNING` (at most once) and dropped
//! by the sweep after their ttl.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{Inbox, ReplyChannel};
use ezmq_core::Result;
use tokio::time::Instant;

use crate::backend::{ms, Inner, PostgresBackend};
use crate::error::column;
use crate::error::PostgresBackendError;
use crate::queue::{self, INBOX_PREFIX};

#[async_trait]
impl ReplyChannel for PostgresBackend {
    async fn open_inbox(&self) -> Result<Box<dyn Inbox>> {
        self.inner.ensure_open()?;
        Ok(Box::new(PostgresInbox {
            inner: Arc::clone(&self.inner),
            address: format!("{INBOX_PREFIX}{}", uuid::Uuid::new_v4().simple()),
        }))
    }

    async fn send_reply(&self, address: &str, body: Bytes, ttl: Duration) -> Result<()> {
        if !queue::is_inbox(address) {
            return Err(PostgresBackendError::BadInboxAddress {
                address: address.to_owned(),
            }
            .into());
        }
        let inner = &self.inner;
        inner
            .timed(
                "send reply",
                sqlx::query(&inner.sql.send_reply)
                    .bind(address)
                    .bind(uuid::Uuid::now_v7().simple().to_string())
                    .bind(&body[..])
                    .bind(ms(ttl).max(1))
                    .execute(&inner.pool),
            )
            .await
            .map(drop)
    }
}

/// One open inbox.
struct PostgresInbox {
    inner: Arc<Inner>,
    address: String,
}

impl fmt::Debug for PostgresInbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresInbox")
            .field("address", &self.address)
            .finish()
    }
}

impl PostgresInbox {
    async fn take(&self, max: usize) -> Result<Vec<Bytes>> {
        let inner = &self.inner;
        let rows = inner
            .timed(
                "take replies",
                sqlx::query(&inner.sql.take_replies)
                    .bind(&self.address)
                    .bind(i64::try_from(max.max(1)).unwrap_or(i64::MAX))
                    .fetch_all(&inner.pool),
            )
            .await?;
        let mut replies = rows
            .into_iter()
            .map(|row| {
                let seq: i64 = column(&row, 0, "take replies")?;
                let body: Vec<u8> = column(&row, 1, "take replies")?;
                Ok((seq, Bytes::from(body)))
            })
            .collect::<Result<Vec<_>>>()?;
        replies.sort_unstable_by_key(|(seq, _)| *seq);
        Ok(replies.into_iter().map(|(_, body)| body).collect())
    }
}

#[async_trait]
impl Inbox for PostgresInbox {
    fn address(&self) -> &str {
        &self.address
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Bytes>> {
        let deadline = Instant::now() + wait;
        let mut woken = self.inner.wakes.subscribe(&self.address);
        loop {
            woken.borrow_and_update();
            let replies = self.take(max).await?;
            let now = Instant::now();
            if !replies.is_empty() || now >= deadline {
                return Ok(replies);
            }
            let until = deadline.min(now + self.inner.config.poll_interval);
            crate::wake::wait(&mut woken, until).await;
        }
    }

    async fn close(&self) -> Result<()> {
        let inner = &self.inner;
        inner
            .timed(
                "close inbox",
                sqlx::query(&inner.sql.drop_queue)
                    .bind(&self.address)
                    .execute(&inner.pool),
            )
            .await
            .map(drop)
    }
}
