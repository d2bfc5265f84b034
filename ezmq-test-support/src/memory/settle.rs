//! Settling in-memory deliveries: ack, retry, release, lease extension.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ezmq_core::job_meta::RESERVATION_HEADER;
use ezmq_core::spi::{Settle, Source};
use ezmq_core::{JobId, Result};
use tokio::time::Instant;

use super::queue::Message;
use super::state::lock;
use super::{Connection, MemoryBroker, MemoryError};

/// The handle of one message leased to a consumer.
#[derive(Debug)]
pub(super) struct MemoryDelivery {
    broker: MemoryBroker,
    conn: Arc<Connection>,
    source: Source,
    token: u64,
    id: JobId,
}

impl MemoryDelivery {
    pub(super) fn new(
        broker: MemoryBroker,
        conn: Arc<Connection>,
        source: Source,
        token: u64,
        id: JobId,
    ) -> Self {
        MemoryDelivery {
            broker,
            conn,
            source,
            token,
            id,
        }
    }

    /// Settles the lease and puts the message back, changed by `change`,
    /// due after `delay`.
    fn requeue(&self, delay: Duration, change: impl FnOnce(&mut Message)) -> Result<()> {
        self.broker.usable(&self.conn)?;
        let now = Instant::now();
        let mut state = lock(&self.broker.state);
        let Some(mut message) = state
            .existing_queue(&self.source)
            .and_then(|queue| queue.settle(self.token, now))
        else {
            return Err(self.not_leased());
        };
        change(&mut message);
        let due = (!delay.is_zero()).then(|| (now + delay, state.next_seq()));
        state.queue(&self.source).add(message, due);
        Ok(())
    }

    fn not_leased(&self) -> ezmq_core::Error {
        MemoryError::NotLeased {
            id: self.id.to_string(),
            queue: self.source.to_string(),
        }
        .into()
    }
}

#[async_trait]
impl Settle for MemoryDelivery {
    async fn ack(&self) -> Result<()> {
        self.broker.usable(&self.conn)?;
        let mut state = lock(&self.broker.state);
        let settled = state
            .existing_queue(&self.source)
            .and_then(|queue| queue.settle(self.token, Instant::now()));
        settled.map(drop).ok_or_else(|| self.not_leased())
    }

    async fn retry(&self, delay: Duration) -> Result<()> {
        self.requeue(delay, |message| {
            message.attempt = message.attempt.saturating_add(1);
        })
    }

    async fn defer(&self, delay: Duration, reservation: Option<&str>) -> Result<()> {
        self.requeue(delay, |message| match reservation {
            Some(mark) => {
                message.headers.insert(RESERVATION_HEADER, mark.to_owned());
            }
            None => {
                message.headers.remove(RESERVATION_HEADER);
            }
        })
    }

    async fn release(&self) -> Result<()> {
        self.broker.usable(&self.conn)?;
        let mut state = lock(&self.broker.state);
        let released = state
            .existing_queue(&self.source)
            .is_some_and(|queue| queue.release(self.token, Instant::now()));
        if released {
            Ok(())
        } else {
            Err(self.not_leased())
        }
    }

    async fn extend_lease(&self) -> Result<Duration> {
        self.broker.usable(&self.conn)?;
        let lease = self.conn.config.lease;
        let mut state = lock(&self.broker.state);
        let extended = state
            .existing_queue(&self.source)
            .is_some_and(|queue| queue.extend(self.token, Instant::now(), lease));
        if extended {
            Ok(lease)
        } else {
            Err(self.not_leased())
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
