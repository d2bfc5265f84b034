//! Queue stats, peek, exclusive claims and the health report of the
//! in-memory broker.

use std::time::Duration;

use async_trait::async_trait;
use ezmq_core::spi::{ClaimOutcome, ExclusiveClaim, Peek, QueueStats, Source};
use ezmq_core::{BrokerHealth, Job, NodeHealth, Result, Topic};
use tokio::time::Instant;

use super::{MemoryBackend, MEMORY_BACKEND_NAME};

impl MemoryBackend {
    /// One node, `server`: up unless the test stopped the broker
    /// ([`MemoryBroker::stop`](super::MemoryBroker::stop)), with the
    /// claims held.
    pub(super) fn health_report(&self) -> Result<BrokerHealth> {
        self.conn.ensure_open()?;
        let health = BrokerHealth::new(MEMORY_BACKEND_NAME).with_fact("mode", "in-process");
        if !self.broker.is_up() {
            return Ok(health.with_node(NodeHealth::down("server")));
        }
        let now = Instant::now();
        let claims = self
            .state()
            .claims
            .values()
            .filter(|(until, _)| *until > now)
            .count();
        Ok(health.with_node(NodeHealth::up("server").with_fact("claims", claims)))
    }
}

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
        let token = ezmq_core::JobId::generate();
        let token = token.as_str();
        Ok(self.claim(key, token, hold).await? == ClaimOutcome::Won)
    }

    async fn claim(&self, key: &Topic, token: &str, hold: Duration) -> Result<ClaimOutcome> {
        self.ensure_open()?;
        let now = Instant::now();
        let mut state = self.state();
        state.claims.retain(|_, (until, _)| *until > now);
        if let Some((_, holder)) = state.claims.get(key) {
            return Ok(ClaimOutcome::Held(Some(holder.clone())));
        }
        state
            .claims
            .insert(key.clone(), (now + hold, token.to_owned()));
        Ok(ClaimOutcome::Won)
    }

    async fn holder(&self, key: &Topic) -> Result<Option<String>> {
        self.ensure_open()?;
        let now = Instant::now();
        let state = self.state();
        Ok(state
            .claims
            .get(key)
            .filter(|(until, _)| *until > now)
            .map(|(_, token)| token.clone()))
    }

    async fn release(&self, key: &Topic, token: &str) -> Result<bool> {
        self.ensure_open()?;
        let now = Instant::now();
        let mut state = self.state();
        let held = state
            .claims
            .get(key)
            .is_some_and(|(until, holder)| *until > now && holder == token);
        if held {
            state.claims.remove(key);
        }
        Ok(held)
    }
}
