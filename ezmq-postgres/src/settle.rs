//! Settling deliveries: ack (`DELETE`), retry, defer and release
//! (`UPDATE` back to waiting), and lease extension — each only while the
//! row still holds this delivery's `(seq, deliveries)`.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ezmq_core::job_meta::RESERVATION_HEADER;
use ezmq_core::spi::{DeliveryHandle, Settle};
use ezmq_core::{JobId, Result};

use crate::backend::{ms, Inner};
use crate::error::PostgresBackendError;

/// The handle of one fetched row.
pub(crate) struct PostgresDelivery {
    inner: Arc<Inner>,
    seq: i64,
    deliveries: i32,
    id: JobId,
}

impl fmt::Debug for PostgresDelivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresDelivery")
            .field("seq", &self.seq)
            .field("deliveries", &self.deliveries)
            .field("id", &self.id)
            .finish()
    }
}

impl PostgresDelivery {
    pub(crate) fn new(inner: Arc<Inner>, seq: i64, deliveries: i32, id: JobId) -> Self {
        PostgresDelivery {
            inner,
            seq,
            deliveries,
            id,
        }
    }

    /// Runs one of the settle statements on this row; fails with
    /// [`PostgresBackendError::NotHeld`] when it changed nothing.
    async fn settle(
        &self,
        statement: &'static str,
        query: sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<()> {
        let done = self
            .inner
            .timed(statement, query.execute(&self.inner.pool))
            .await?;
        if done.rows_affected() == 0 {
            return Err(PostgresBackendError::NotHeld {
                id: self.id.to_string(),
            }
            .into());
        }
        Ok(())
    }
}

#[async_trait]
impl Settle for PostgresDelivery {
    async fn ack(&self) -> Result<()> {
        let sql = &self.inner.sql;
        self.settle(
            "ack",
            sqlx::query(&sql.ack).bind(self.seq).bind(self.deliveries),
        )
        .await
    }

    async fn retry(&self, delay: Duration) -> Result<()> {
        let sql = &self.inner.sql;
        self.settle(
            "retry",
            sqlx::query(&sql.retry)
                .bind(self.seq)
                .bind(self.deliveries)
                .bind(ms(delay)),
        )
        .await
    }

    /// Back to waiting until `delay` ends, as the same attempt, with the
    /// reservation header set or removed in the same `UPDATE`.
    async fn defer(&self, delay: Duration, reservation: Option<&str>) -> Result<()> {
        let sql = &self.inner.sql;
        self.settle(
            "defer",
            sqlx::query(&sql.defer)
                .bind(self.seq)
                .bind(self.deliveries)
                .bind(ms(delay))
                .bind(reservation)
                .bind(RESERVATION_HEADER),
        )
        .await
    }

    async fn release(&self) -> Result<()> {
        let sql = &self.inner.sql;
        self.settle(
            "release",
            sqlx::query(&sql.release)
                .bind(self.seq)
                .bind(self.deliveries),
        )
        .await
    }

    async fn extend_lease(&self) -> Result<Duration> {
        let sql = &self.inner.sql;
        let lease = self.inner.config.lease;
        self.settle(
            "extend lease",
            sqlx::query(&sql.extend)
                .bind(self.seq)
                .bind(self.deliveries)
                .bind(ms(lease)),
        )
        .await?;
        Ok(lease)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Deletes the rows `(seq, deliveries)` still held by those deliveries,
/// in one statement.
pub(crate) async fn ack_rows(inner: &Inner, rows: &[(i64, i32)]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let (seqs, deliveries): (Vec<i64>, Vec<i32>) = rows.iter().copied().unzip();
    inner
        .timed(
            "ack",
            sqlx::query(&inner.sql.ack_batch)
                .bind(&seqs)
                .bind(&deliveries)
                .execute(&inner.pool),
        )
        .await
        .map(drop)
}

/// [`Backend::ack_batch`](ezmq_core::spi::Backend::ack_batch): one
/// `DELETE` for every handle of this backend.
pub(crate) async fn ack_batch(inner: &Arc<Inner>, handles: &[DeliveryHandle]) -> Result<()> {
    let mut rows = Vec::with_capacity(handles.len());
    let mut foreign = Vec::new();
    for handle in handles {
        match handle.downcast_ref::<PostgresDelivery>() {
            Some(delivery) => rows.push((delivery.seq, delivery.deliveries)),
            None => foreign.push(handle),
        }
    }
    ack_rows(inner, &rows).await?;
    for handle in foreign {
        handle.ack().await?;
    }
    Ok(())
}
