//! Compacting a small registry topic: what the crontab registry and
//! presence do about once a minute so that peeking readers stay fast.

use std::time::Duration;

use bytes::Bytes;

use crate::error::Result;
use crate::job::Job;
use crate::push_options::PushOptions;
use crate::topic::Topic;

use super::backend::Backend;
use super::delivery::DeliveryHandle;
use super::source::Source;

/// Messages received per call.
const BATCH: usize = 500;

/// Rewrites `topic` as `keep` says: takes every waiting message (the core
/// `receive`, in batches), publishes again what `keep` returns for them,
/// then acknowledges what it took. When a publish fails, everything taken
/// goes back to the broker: nothing is lost (readers that merge
/// duplicates see at worst a message twice). Returns how many messages
/// were published again.
///
/// For small registry topics that readers [`Peek`](super::Peek) and merge
/// (crontab announcements, presence records); a reader that peeks while a
/// compaction runs may miss what it holds for those few milliseconds.
pub async fn compact_topic<F>(backend: &dyn Backend, topic: &Topic, keep: F) -> Result<usize>
where
    F: FnOnce(Vec<Job>) -> Vec<(Bytes, PushOptions)>,
{
    let source = Source::Topic(topic.clone());
    let mut jobs = Vec::new();
    let mut handles = Vec::new();
    loop {
        let batch = backend.receive(&source, BATCH, Duration::ZERO).await?;
        if batch.is_empty() {
            break;
        }
        for delivery in batch {
            jobs.push(delivery.job);
            handles.push(delivery.handle);
        }
    }
    let kept = keep(jobs);
    for (body, options) in &kept {
        if let Err(e) = backend.publish(topic, body.clone(), options).await {
            release_all(&handles).await;
            return Err(e);
        }
    }
    backend.ack_batch(&handles).await?;
    Ok(kept.len())
}

async fn release_all(handles: &[DeliveryHandle]) {
    for handle in handles {
        let _ = handle.release().await;
    }
}
