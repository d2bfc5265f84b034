//! Exclusive claims: a row per held key, taken by an upsert that only
//! replaces an expired holder.

use std::time::Duration;

use async_trait::async_trait;
use ezmq_core::spi::{ClaimOutcome, ExclusiveClaim};
use ezmq_core::{Result, Topic};

use crate::backend::{ms, Inner, PostgresBackend};

#[async_trait]
impl ExclusiveClaim for PostgresBackend {
    async fn try_claim(&self, key: &Topic, hold: Duration) -> Result<bool> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        self.inner.take_claim(key.as_str(), &token, hold).await
    }

    async fn claim(&self, key: &Topic, token: &str, hold: Duration) -> Result<ClaimOutcome> {
        // The holder can end between the upsert and the read: look again.
        for _ in 0..3 {
            if self.inner.take_claim(key.as_str(), token, hold).await? {
                return Ok(ClaimOutcome::Won);
            }
            if let Some(holder) = self.holder(key).await? {
                return Ok(ClaimOutcome::Held(Some(holder)));
            }
        }
        Ok(ClaimOutcome::Held(None))
    }

    async fn holder(&self, key: &Topic) -> Result<Option<String>> {
        let inner = &self.inner;
        inner
            .timed(
                "claim holder",
                sqlx::query_scalar(&inner.sql.holder)
                    .bind(key.as_str())
                    .fetch_optional(&inner.pool),
            )
            .await
    }

    async fn release(&self, key: &Topic, token: &str) -> Result<bool> {
        let inner = &self.inner;
        let done = inner
            .timed(
                "release claim",
                sqlx::query(&inner.sql.release_claim)
                    .bind(key.as_str())
                    .bind(token)
                    .execute(&inner.pool),
            )
            .await?;
        Ok(done.rows_affected() > 0)
    }
}

impl Inner {
    /// Takes `key` under `token` unless a live holder has it: the
    /// upsert's `WHERE` sees the row as it is once the conflicting
    /// transaction ended, so exactly one of concurrent callers changes it.
    pub(crate) async fn take_claim(&self, key: &str, token: &str, hold: Duration) -> Result<bool> {
        let done = self
            .timed(
                "claim",
                sqlx::query(&self.sql.claim)
                    .bind(key)
                    .bind(token)
                    .bind(ms(hold))
                    .execute(&self.pool),
            )
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
