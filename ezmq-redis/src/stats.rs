//! Queue length and peek.

use std::collections::BTreeSet;

use async_trait::async_trait;
use ezmq_core::spi::{Peek, QueueStats};
use ezmq_core::{Job, JobId, Result, Topic, MESSAGE_ID_HEADER};
use redis::Value;

use crate::backend::RedisBackend;
use crate::codec;
use crate::error;
use crate::keys::{TopicKeys, QUEUE_GROUP};
use crate::scripts;

#[async_trait]
impl QueueStats for RedisBackend {
    /// `XLEN` minus the group's pending count (`XPENDING`), read
    /// atomically by one script. Acknowledged entries are deleted, so the
    /// stream holds exactly the waiting entries plus the pending ones:
    /// the result is exact. Not counted: delayed messages (until due) and
    /// messages being processed (pending); counted: messages past their
    /// ttl that no consumer has dropped yet.
    async fn queue_len(&self, topic: &Topic) -> Result<u64> {
        self.inner.ensure_open()?;
        let keys = TopicKeys::queue(&self.inner.config.key_prefix, topic);
        let len: i64 = scripts::QUEUE_LEN
            .key(&keys.stream)
            .arg(QUEUE_GROUP)
            .invoke_async(&mut self.inner.conn())
            .await
            .map_err(error::command("queue length script"))?;
        Ok(u64::try_from(len).unwrap_or(0))
    }

    /// The group's pending count (`XPENDING`): delivered, not settled.
    async fn in_flight(&self, topic: &Topic) -> Result<Option<u64>> {
        self.inner.ensure_open()?;
        let keys = TopicKeys::queue(&self.inner.config.key_prefix, topic);
        let pending: i64 = scripts::IN_FLIGHT
            .key(&keys.stream)
            .arg(QUEUE_GROUP)
            .invoke_async(&mut self.inner.conn())
            .await
            .map_err(error::command("in-flight script"))?;
        Ok(Some(u64::try_from(pending).unwrap_or(0)))
    }

    /// The topics with a queue stream or delayed messages (`SCAN` for
    /// `<prefix>:{*}:s` and `:d`); `None` on a Redis Cluster, where a scan
    /// would have to visit every node (the live listeners' topics are
    /// still listed there).
    async fn topics(&self) -> Result<Option<Vec<Topic>>> {
        self.inner.ensure_open()?;
        let prefix = &self.inner.config.key_prefix;
        if self.inner.config.cluster {
            return Ok(None);
        }
        let pattern = format!("{prefix}:{{*}}:[sd]");
        let head = format!("{prefix}:{{");
        let mut names = BTreeSet::new();
        let mut cursor = 0_u64;
        let mut conn = self.inner.conn();
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query_async(&mut conn)
                .await
                .map_err(error::command("SCAN"))?;
            for key in &keys {
                let name = key
                    .strip_prefix(&head)
                    .and_then(|rest| rest.strip_suffix("}:s").or(rest.strip_suffix("}:d")));
                if let Some(topic) = name.and_then(|name| Topic::new(name).ok()) {
                    names.insert(topic.as_str().to_owned());
                }
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        Ok(Some(
            names
                .into_iter()
                .filter_map(|n| Topic::new(n).ok())
                .collect(),
        ))
    }
}

/// Keys a `SCAN` call looks at.
const SCAN_COUNT: usize = 1000;

#[async_trait]
impl Peek for RedisBackend {
    /// The entries after the group's last-delivered id (`XINFO GROUPS`,
    /// then `XRANGE`, in one script), oldest first: the messages no
    /// consumer has received yet. Delayed messages are not included.
    async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>> {
        self.inner.ensure_open()?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let keys = TopicKeys::queue(&self.inner.config.key_prefix, topic);
        let value: Value = scripts::PEEK
            .key(&keys.stream)
            .arg(QUEUE_GROUP)
            .arg(n)
            .invoke_async(&mut self.inner.conn())
            .await
            .map_err(error::command("peek script"))?;
        let entries = codec::entries("peek script", value)?;
        Ok(entries
            .into_iter()
            .filter_map(|entry| {
                let message = entry.message?;
                let id = message
                    .headers
                    .get(MESSAGE_ID_HEADER)
                    .map_or_else(|| entry.id.clone(), str::to_owned);
                let attempt = message.headers.attempt().unwrap_or(1);
                Some(
                    Job::new(JobId::new(id), topic.clone(), message.body)
                        .with_headers(message.headers)
                        .with_attempt(attempt),
                )
            })
            .collect())
    }
}
