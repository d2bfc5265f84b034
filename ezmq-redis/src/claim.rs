//! Exclusive claims (distributed cron, unique jobs, topic pauses): one
//! key each, `SET NX PX` and two small scripts.

use std::time::Duration;

use async_trait::async_trait;
use ezmq_core::spi::{ClaimOutcome, ExclusiveClaim};
use ezmq_core::{Result, Topic};
use redis::Value;

use crate::backend::{ms_ceil, RedisBackend};
use crate::error;
use crate::keys;
use crate::scripts;

#[async_trait]
impl ExclusiveClaim for RedisBackend {
    /// `SET <prefix>:claim:{<key>} <consumer> NX PX <hold>`: the first
    /// caller wins until `hold` has passed. On a Redis Cluster the slot's
    /// primary decides. Replication is asynchronous: when a primary fails
    /// over before the claim reached its replica, the new primary does not
    /// know it and a second caller can win the same claim (a cron tick can
    /// run twice). [`RedisConfig::wait_replicas`](crate::RedisConfig::wait_replicas)
    /// does not cover claims.
    async fn try_claim(&self, key: &Topic, hold: Duration) -> Result<bool> {
        self.inner.ensure_open()?;
        let value: Value = redis::cmd("SET")
            .arg(keys::claim(&self.inner.config.key_prefix, key))
            .arg(&self.inner.consumer)
            .arg("NX")
            .arg("PX")
            .arg(ms_ceil(hold).max(1))
            .query_async(&mut self.inner.conn())
            .await
            .map_err(error::command("SET NX"))?;
        Ok(!matches!(value, Value::Nil))
    }

    /// The same key as [`ExclusiveClaim::try_claim`], holding `token`: one
    /// script reads the holder and sets the key when there is none.
    async fn claim(&self, key: &Topic, token: &str, hold: Duration) -> Result<ClaimOutcome> {
        self.inner.ensure_open()?;
        let holder: Option<String> = scripts::CLAIM
            .key(keys::claim(&self.inner.config.key_prefix, key))
            .arg(token)
            .arg(ms_ceil(hold).max(1))
            .invoke_async(&mut self.inner.conn())
            .await
            .map_err(error::command("claim script"))?;
        Ok(match holder {
            None => ClaimOutcome::Won,
            Some(token) => ClaimOutcome::Held(Some(token)),
        })
    }

    /// `GET` of the claim's key.
    async fn holder(&self, key: &Topic) -> Result<Option<String>> {
        self.inner.ensure_open()?;
        redis::cmd("GET")
            .arg(keys::claim(&self.inner.config.key_prefix, key))
            .query_async(&mut self.inner.conn())
            .await
            .map_err(error::command("GET"))
    }

    /// Deletes the claim's key in a script, only while `token` holds it.
    async fn release(&self, key: &Topic, token: &str) -> Result<bool> {
        self.inner.ensure_open()?;
        let deleted: i64 = scripts::RELEASE
            .key(keys::claim(&self.inner.config.key_prefix, key))
            .arg(token)
            .invoke_async(&mut self.inner.conn())
            .await
            .map_err(error::command("release script"))?;
        Ok(deleted == 1)
    }
}
