//! Queue stats, peek and exclusive claims of the in-memory broker.

use std::time::Duration;

use async_trait::async_trait;
use ezmq_core::spi::{ExclusiveClaim, Peek, QueueStats, Source};
use ezmq_core::{Job, Result, Topic};
use tokio::time::Instant;

use super::MemoryBackend;

#[async_trait]
impl QueueStats for MemoryBackend {
    async fn queue_len(&self, topic: &Topic) -> Result<u64> {
        self.ensure_open()?;
        let now = Instant::now();
        let mut state = self.state();
        Ok(state
            .existing_queue(&Source::Topic(topic.clone()))
            .map_or(0, |queue| {
                queue.sweep(now);
                queue.ready_len(now)
            }))
    }

    async fn in_flight(&self, topic: &Topic) -> Result<Option<u64>> {
        self.ensure_open()?;
        let now = Instant::now();
        let mut state = self.state();
        Ok(Some(
            state
                .existing_queue(&Source::Topic(topic.clone()))
                .map_or(0, |queue| {
                    queue.sweep(now);
                    queue.leased_len()
                }),
        ))
    }
}

#[async_trait]
impl Peek for MemoryBackend {
    async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>> {
        self.ensure_open()?;
        let now = Instant::now();
        let mut state = self.state();
        Ok(state
            .existing_queue(&Source::Topic(topic.clone()))
            .map(|queue| {
                queue.sweep(now);
                queue.peek(n, now).map(|m| m.job(topic)).collect()
            })
            .unwrap_or_default())
    }
}

#[async_trait]
impl ExclusiveClaim for MemoryBackend {
    async fn try_claim(&self, key: &Topic, hold: Duration) -> Result<bool> {
        self.ensure_open()?;
        let now = Instant::now();
        let mut state = self.state();
        let held = state.claims.get(key).is_some_and(|until| *until > now);
        if held {
            return Ok(false);
        }
        state.claims.retain(|_, until| *until > now);
        state.claims.insert(key.clone(), now + hold);
        Ok(true)
    }
}
