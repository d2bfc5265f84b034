//! Sampling the queue length of a listened topic into the
//! `ezmq.queue.depth` gauge, on backends that count messages: every job
//! waiting, in the topic's priority lanes too while the listener reads
//! them.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::spi::{QueueStats, Source};
use crate::topic::Topic;

use super::Ctx;

/// Samples every `every` until `finish` is cancelled. Ends at once when the
/// backend has no queue statistics or the source is a broadcast group (its
/// copies are the backend's own business).
pub(crate) async fn run(ctx: Arc<Ctx>, every: Duration, finish: CancellationToken) {
    let Some(stats) = ctx.backend.queue_stats() else {
        return;
    };
    let Source::Topic(topic) = &ctx.source else {
        return;
    };
    let gauge = ctx.telemetry.queue_depth();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = finish.cancelled() => return,
            _ = tick.tick() => {}
        }
        let sampled = tokio::select! {
            biased;
            () = finish.cancelled() => return,
            sampled = sample(&ctx, stats, topic) => sampled,
        };
        match sampled {
            // Precision is lost only past 2^53 messages.
            #[allow(clippy::cast_precision_loss)]
            Ok(waiting) => gauge.set(waiting as f64),
            Err(err) => tracing::debug!(cause = %err, "queue depth not sampled"),
        }
    }
}

/// The jobs waiting in `topic`, and in its lanes while they are read.
async fn sample(ctx: &Ctx, stats: &dyn QueueStats, topic: &Topic) -> Result<u64> {
    match &ctx.lanes {
        Some(lanes) if lanes.is_active() => {
            let lens =
                futures::future::try_join_all(lanes.topics().map(|lane| stats.queue_len(lane)))
                    .await?;
            Ok(lens.into_iter().sum())
        }
        _ => stats.queue_len(topic).await,
    }
}
