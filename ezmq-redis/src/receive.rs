//! Receiving: delayed messages promoted when due, expired leases
//! reclaimed, new entries read with `XREADGROUP`.

use std::sync::Arc;
use std::time::Duration;

use ezmq_core::spi::{Delivery, Source};
use ezmq_core::{Job, JobId, Result, MESSAGE_ID_HEADER};
use redis::Value;
use tokio::time::Instant;

use crate::backend::{ms_ceil, unix_ms, Inner};
use crate::codec::{self, Entry};
use crate::error::{self, is_no_group};
use crate::scripts;
use crate::settle::RedisDelivery;
use crate::source::{Kind, SourceState};

/// Most delayed messages moved into the stream by one script run.
const PROMOTE_BATCH: usize = 512;

impl Inner {
    /// See [`Backend::receive`](ezmq_core::spi::Backend::receive).
    ///
    /// Loops until `wait` is over: each turn moves due delayed messages
    /// into the stream (at most every [`block_wait`](crate::RedisConfig::block_wait),
    /// or exactly when the next one is due), reclaims entries whose lease
    /// ended (every [`reclaim_interval`](crate::RedisConfig::reclaim_interval)),
    /// then blocks in `XREADGROUP` until the next of those is due.
    pub(crate) async fn receive(
        self: &Arc<Self>,
        source: &Source,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Delivery>> {
        self.ensure_open()?;
        let max = max.max(1);
        let state = self.source_state(source);
        if !state.is_ready() {
            self.create_group(&state).await?;
        }
        let deadline = Instant::now() + wait;
        loop {
            let now = Instant::now();
            if state.promote_due(now) {
                self.promote(&state, now).await?;
            }
            if state.reclaim_due(now) {
                state.reclaim_after(self.config.reclaim_interval, false);
                let got = self.reclaim(&state, max).await?;
                if !got.is_empty() {
                    return Ok(got);
                }
            }
            let now = Instant::now();
            let block = deadline
                .saturating_duration_since(now)
                .min(self.config.block_wait)
                .min(state.until_promote(now));
            let got = self.read(&state, max, block).await?;
            if !got.is_empty() || Instant::now() >= deadline {
                return Ok(got);
            }
        }
    }

    /// Creates the consumer group: at the stream's start for a queue (it
    /// must see every message pushed before its first consumer), at its
    /// end for a broadcast group (its join point).
    pub(crate) async fn create_group(&self, state: &SourceState) -> Result<()> {
        match &state.kind {
            Kind::Queue => {
                let created: redis::RedisResult<Value> = redis::cmd("XGROUP")
                    .arg("CREATE")
                    .arg(&state.keys.stream)
                    .arg(&state.group)
                    .arg("0")
                    .arg("MKSTREAM")
                    .query_async(&mut self.conn())
                    .await;
                match created {
                    Ok(_) => {}
                    Err(err) if err.code() == Some("BUSYGROUP") => {}
                    Err(err) => return Err(error::command("XGROUP CREATE")(err)),
                }
            }
            Kind::Broadcast { topic, group } => {
                let retention = self
                    .joined
                    .lock()
                    .ok()
                    .and_then(|j| j.get(&(topic.clone(), group.clone())).copied())
                    .unwrap_or(self.config.default_group_retention);
                self.join(state, retention).await?;
            }
        }
        state.set_ready(true);
        Ok(())
    }

    /// Runs the join script for a broadcast group (creates it at `$` when
    /// missing, records its deadline).
    pub(crate) async fn join(&self, state: &SourceState, retention: Duration) -> Result<bool> {
        let created: i64 = scripts::JOIN
            .key(&state.keys.stream)
            .key(&state.keys.groups)
            .arg(&state.group)
            .arg(ms_ceil(retention))
            .invoke_async(&mut self.conn())
            .await
            .map_err(error::command("join script"))?;
        Ok(created == 1)
    }

    /// Moves due delayed messages into the stream and plans the next look.
    async fn promote(&self, state: &SourceState, now: Instant) -> Result<()> {
        let max_len = match state.kind {
            Kind::Queue => self.config.stream_max_len.unwrap_or(0),
            Kind::Broadcast { .. } => self.config.broadcast_max_len,
        };
        let (moved, next_ms): (i64, i64) = scripts::PROMOTE
            .key(&state.keys.delayed)
            .key(&state.keys.stream)
            .arg(PROMOTE_BATCH)
            .arg(max_len)
            .invoke_async(&mut self.conn())
            .await
            .map_err(error::command("promote script"))?;
        let poll = self.config.block_wait;
        let after = if usize::try_from(moved).unwrap_or(0) >= PROMOTE_BATCH {
            Duration::ZERO
        } else if next_ms >= 0 {
            Duration::from_millis(u64::try_from(next_ms).unwrap_or(0)).min(poll)
        } else {
            poll
        };
        state.promote_after(now, after);
        Ok(())
    }

    /// Claims entries idle longer than the lease (their consumer died or
    /// gave them back).
    async fn reclaim(
        self: &Arc<Self>,
        state: &Arc<SourceState>,
        max: usize,
    ) -> Result<Vec<Delivery>> {
        let value: redis::RedisResult<Value> = scripts::RECLAIM
            .key(&state.keys.stream)
            .arg(&state.group)
            .arg(&self.consumer)
            .arg(ms_ceil(self.config.lease))
            .arg(max)
            .invoke_async(&mut self.conn())
            .await;
        let value = match value {
            Ok(value) => value,
            Err(err) if is_no_group(&err) => {
                state.set_ready(false);
                self.create_group(state).await?;
                return Ok(Vec::new());
            }
            Err(err) => return Err(error::command("reclaim script")(err)),
        };
        let entries = codec::entries("reclaim script", value)?;
        if !entries.is_empty() {
            tracing::debug!(source = %state.topic, count = entries.len(), "reclaimed entries whose lease ended");
        }
        self.deliveries(state, entries).await
    }

    /// `XREADGROUP ... COUNT max [BLOCK block] STREAMS key >`.
    async fn read(
        self: &Arc<Self>,
        state: &Arc<SourceState>,
        max: usize,
        block: Duration,
    ) -> Result<Vec<Delivery>> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(&state.group)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(max);
        let block_ms = u64::try_from(block.as_millis()).unwrap_or(u64::MAX);
        if block_ms > 0 {
            cmd.arg("BLOCK").arg(block_ms);
        }
        cmd.arg("STREAMS").arg(&state.keys.stream).arg(">");
        let result = if block_ms > 0 {
            self.blocking("XREADGROUP", &cmd, block).await?
        } else {
            cmd.query_async::<Value>(&mut self.conn()).await
        };
        let value = match result {
            Ok(value) => value,
            Err(err) if is_no_group(&err) => {
                // The stream (or group) vanished: a restart without
                // persistence, or a pruned broadcast group.
                tracing::info!(source = %state.topic, group = %state.group, "consumer group missing; recreating it");
                state.set_ready(false);
                self.create_group(state).await?;
                return Ok(Vec::new());
            }
            Err(err) => return Err(error::command("XREADGROUP")(err)),
        };
        let entries = match value {
            Value::Nil => Vec::new(),
            Value::Array(streams) => match streams.into_iter().next() {
                Some(Value::Array(mut pair)) if pair.len() == 2 => {
                    codec::entries("XREADGROUP", pair.swap_remove(1))?
                }
                Some(other) => {
                    return Err(error::unexpected("XREADGROUP", format!("{other:?}")));
                }
                None => Vec::new(),
            },
            Value::Map(streams) => match streams.into_iter().next() {
                Some((_, entries)) => codec::entries("XREADGROUP", entries)?,
                None => Vec::new(),
            },
            other => return Err(error::unexpected("XREADGROUP", format!("{other:?}"))),
        };
        self.deliveries(state, entries).await
    }

    /// Turns entries into deliveries; entries deleted while pending or past
    /// their ttl are acknowledged (and deleted) instead.
    async fn deliveries(
        self: &Arc<Self>,
        state: &Arc<SourceState>,
        entries: Vec<Entry>,
    ) -> Result<Vec<Delivery>> {
        let now = unix_ms();
        let mut out = Vec::with_capacity(entries.len());
        let mut dropped = Vec::new();
        for entry in entries {
            let Some(message) = entry.message else {
                dropped.push(entry.id);
                continue;
            };
            if message.expires_at.is_some_and(|at| at <= now) {
                tracing::debug!(source = %state.topic, entry = %entry.id, "message expired before delivery; dropped");
                dropped.push(entry.id);
                continue;
            }
            let base = message.headers.attempt().unwrap_or(1).max(1);
            let extra = u32::try_from(entry.deliveries.saturating_sub(1)).unwrap_or(u32::MAX);
            let attempt = base.saturating_add(extra);
            let id = message
                .headers
                .get(MESSAGE_ID_HEADER)
                .map_or_else(|| entry.id.clone(), str::to_owned);
            let job = Job::new(JobId::new(id), state.topic.clone(), message.body.clone())
                .with_headers(message.headers.clone())
                .with_attempt(attempt);
            let handle = RedisDelivery::new(
                Arc::clone(self),
                Arc::clone(state),
                entry.id,
                message,
                attempt,
                entry.deliveries,
            );
            out.push(Delivery::new(job, handle));
        }
        if !dropped.is_empty() {
            crate::settle::ack_ids(self, state, &dropped).await?;
        }
        Ok(out)
    }
}
