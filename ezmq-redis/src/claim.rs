//! Exclusive claims (distributed cron): `SET key NX PX`.

use std::time::Duration;

use async_trait::async_trait;
use ezmq_core::spi::ExclusiveClaim;
use ezmq_core::{Result, Topic};
use redis::Value;

use crate::backend::{ms_ceil, RedisBackend};
use crate::error;
use crate::keys;

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
}
