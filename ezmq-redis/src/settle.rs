//! Settling deliveries: ack (`XACK`, plus `XDEL` on queues), retry, release
//! and lease extension.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ezmq_core::job_meta::RESERVATION_HEADER;
use ezmq_core::spi::{DeliveryHandle, Settle};
use ezmq_core::{Result, ATTEMPT_HEADER, MESSAGE_ID_HEADER};
use redis::{ToRedisArgs, Value};

use crate::backend::{ms_ceil, Inner};
use crate::codec::Message;
use crate::error::{self, RedisBackendError};
use crate::scripts;
use crate::source::SourceState;

/// The handle of one stream entry delivered to this consumer.
pub(crate) struct RedisDelivery {
    inner: Arc<Inner>,
    state: Arc<SourceState>,
    entry: String,
    message: Message,
    attempt: u32,
    deliveries: u64,
}

impl fmt::Debug for RedisDelivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisDelivery")
            .field("stream", &self.state.keys.stream)
            .field("group", &self.state.group)
            .field("entry", &self.entry)
            .field("attempt", &self.attempt)
            .finish()
    }
}

impl RedisDelivery {
    pub(crate) fn new(
        inner: Arc<Inner>,
        state: Arc<SourceState>,
        entry: String,
        message: Message,
        attempt: u32,
        deliveries: u64,
    ) -> Self {
        RedisDelivery {
            inner,
            state,
            entry,
            message,
            attempt,
            deliveries,
        }
    }

    /// The message to put back: its headers as stored (core's job id
    /// among them, so the job keeps its id), with `attempt`. A foreign
    /// entry (pushed without ezmq, no `ezmq-message-id`) was delivered
    /// with its entry id as job id: that id goes with it, since the re-add
    /// makes a new entry.
    fn requeued(&self, attempt: u32) -> Message {
        self.requeued_with(attempt, None)
    }

    /// [`RedisDelivery::requeued`] with `header` set to its value, or
    /// removed when that is `None`.
    fn requeued_with(&self, attempt: u32, header: Option<(&str, Option<&str>)>) -> Message {
        let mut message = self.message.clone();
        message.headers.insert(ATTEMPT_HEADER, attempt.to_string());
        match header {
            Some((name, Some(value))) => {
                message.headers.insert(name, value.to_owned());
            }
            Some((name, None)) => {
                message.headers.remove(name);
            }
            None => {}
        }
        if message.headers.get(MESSAGE_ID_HEADER).is_none() {
            message
                .headers
                .insert(MESSAGE_ID_HEADER, self.entry.clone());
        }
        message
    }

    /// Queue: atomically acknowledge and delete the entry, and re-add the
    /// message now (`delay` zero) or schedule it.
    async fn requeue(&self, attempt: u32, delay: Duration) -> Result<()> {
        self.requeue_message(self.requeued(attempt), delay).await
    }

    async fn requeue_message(&self, message: Message, delay: Duration) -> Result<()> {
        let max_len = self.inner.config.stream_max_len.unwrap_or(0);
        let done: i64 = scripts::REQUEUE
            .key(&self.state.keys.stream)
            .key(&self.state.keys.delayed)
            .arg(&self.state.group)
            .arg(&self.entry)
            .arg(ms_ceil(delay))
            .arg(message.delayed_member())
            .arg(max_len)
            .invoke_async(&mut self.inner.conn())
            .await
            .map_err(error::command("requeue script"))?;
        if done == 0 {
            return Err(self.not_pending());
        }
        if !delay.is_zero() {
            self.state.note_due_in(delay);
        }
        Ok(())
    }

    /// Broadcast group: keep the entry pending but make it reclaimable
    /// after `after` (by setting its idle time to `lease - after`), with
    /// delivery count `count` (`None`: unchanged, the reclaim adds one).
    async fn reclaimable_after(&self, after: Duration, count: Option<u64>) -> Result<()> {
        let lease = self.inner.config.lease;
        let idle = lease.saturating_sub(after);
        let mut cmd = redis::cmd("XCLAIM");
        cmd.arg(&self.state.keys.stream)
            .arg(&self.state.group)
            .arg(&self.inner.consumer)
            .arg(0)
            .arg(&self.entry)
            .arg("IDLE")
            .arg(ms_ceil(idle));
        if let Some(count) = count {
            cmd.arg("RETRYCOUNT").arg(count);
        }
        cmd.arg("JUSTID");
        let claimed: Vec<Value> = cmd
            .query_async(&mut self.inner.conn())
            .await
            .map_err(error::command("XCLAIM"))?;
        if claimed.is_empty() {
            return Err(self.not_pending());
        }
        self.state.reclaim_after(after.min(lease), true);
        Ok(())
    }

    fn not_pending(&self) -> ezmq_core::Error {
        RedisBackendError::NotPending {
            id: self.entry.clone(),
        }
        .into()
    }
}

#[async_trait]
impl Settle for RedisDelivery {
    async fn ack(&self) -> Result<()> {
        self.inner.ensure_open()?;
        ack_ids(&self.inner, &self.state, std::slice::from_ref(&self.entry)).await
    }

    async fn retry(&self, delay: Duration) -> Result<()> {
        self.inner.ensure_open()?;
        if self.state.is_queue() {
            self.requeue(self.attempt.saturating_add(1), delay).await
        } else {
            self.reclaimable_after(delay, None).await
        }
    }

    /// A queue's entry: the requeue script, as a retry, with the same
    /// attempt and the reservation header. A broadcast group has no
    /// per-key limits.
    async fn defer(&self, delay: Duration, reservation: Option<&str>) -> Result<()> {
        self.inner.ensure_open()?;
        if !self.state.is_queue() {
            return Err(ezmq_core::Error::Unsupported {
                backend: "redis",
                capability: ezmq_core::spi::Capability::RateLimitByKey,
            });
        }
        let message = self.requeued_with(self.attempt, Some((RESERVATION_HEADER, reservation)));
        self.requeue_message(message, delay).await
    }

    async fn release(&self) -> Result<()> {
        self.inner.ensure_open()?;
        if self.state.is_queue() {
            self.requeue(self.attempt, Duration::ZERO).await
        } else {
            // The reclaim adds one delivery: count one less now.
            self.reclaimable_after(Duration::ZERO, Some(self.deliveries.saturating_sub(1)))
                .await
        }
    }

    async fn extend_lease(&self) -> Result<Duration> {
        self.inner.ensure_open()?;
        let claimed: Vec<Value> = redis::cmd("XCLAIM")
            .arg(&self.state.keys.stream)
            .arg(&self.state.group)
            .arg(&self.inner.consumer)
            .arg(0)
            .arg(&self.entry)
            .arg("JUSTID")
            .query_async(&mut self.inner.conn())
            .await
            .map_err(error::command("XCLAIM"))?;
        if claimed.is_empty() {
            return Err(self.not_pending());
        }
        Ok(self.inner.config.lease)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Acknowledges `ids` of one source in one round trip: `XACK` (and `XDEL`
/// for a queue, so its stream holds only waiting and in-flight entries).
pub(crate) async fn ack_ids<T: ToRedisArgs>(
    inner: &Inner,
    state: &SourceState,
    ids: &[T],
) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    pipe.cmd("XACK")
        .arg(&state.keys.stream)
        .arg(&state.group)
        .arg(ids)
        .ignore();
    if state.is_queue() {
        pipe.cmd("XDEL").arg(&state.keys.stream).arg(ids).ignore();
    }
    pipe.query_async::<()>(&mut inner.conn())
        .await
        .map_err(error::command("XACK"))
}

/// [`Backend::ack_batch`](ezmq_core::spi::Backend::ack_batch): one
/// `XACK` (+ `XDEL`) per source for every handle of it.
///
/// Hot path (every acknowledged message): handles are grouped by their
/// source's state (pointer equality; a listener's batch has one source)
/// and the entry ids borrowed, so nothing is allocated per handle.
pub(crate) async fn ack_batch(inner: &Arc<Inner>, handles: &[DeliveryHandle]) -> Result<()> {
    inner.ensure_open()?;
    let mut by_source: Vec<(&Arc<SourceState>, Vec<&str>)> = Vec::new();
    let mut foreign = Vec::new();
    for handle in handles {
        match handle.downcast_ref::<RedisDelivery>() {
            Some(delivery) => {
                let id = delivery.entry.as_str();
                match by_source
                    .iter_mut()
                    .find(|(state, _)| Arc::ptr_eq(state, &delivery.state))
                {
                    Some((_, ids)) => ids.push(id),
                    None => {
                        let mut ids = Vec::with_capacity(handles.len());
                        ids.push(id);
                        by_source.push((&delivery.state, ids));
                    }
                }
            }
            None => foreign.push(handle),
        }
    }
    let results = match by_source.as_slice() {
        [(state, ids)] => vec![ack_ids(inner, state, ids).await],
        _ => {
            let batches = by_source
                .iter()
                .map(|(state, ids)| ack_ids(inner, state, ids));
            futures::future::join_all(batches).await
        }
    };
    for handle in foreign {
        handle.ack().await?;
    }
    results.into_iter().collect()
}
