//! Giving back a consumer's prefetch: cancelling it when its listener
//! pauses, re-creating it with another prefetch, and the deliveries lapin
//! drops for a cancelled consumer.

use std::time::Instant;

use ezmq_core::spi::Source;
use ezmq_core::Result;
use futures::{FutureExt, StreamExt};
use lapin::options::BasicCancelOptions;

use super::{consume, ConsumerState, Raw};
use crate::backend::Inner;
use crate::delivery::Tracker;
use crate::error::RabbitError;
use crate::idle;
use crate::prefetch::{self, Sizing};
use crate::session::within;

/// Cancels the consumer (`basic.cancel`; the broker delivers nothing more
/// to it) and takes what it had buffered and not handed out: everything
/// the broker sent before its `cancel-ok`. The deliveries handed out stay
/// unacked on the channel, which stays open. Nothing when already
/// cancelled.
pub(super) async fn cancel(state: &mut ConsumerState) -> Result<Vec<Raw>, RabbitError> {
    let Some(mut stream) = state.stream.take() else {
        return Ok(Vec::new());
    };
    let queue = state.tracker.queue.as_str();
    let cancel = state
        .tracker
        .channel
        .basic_cancel(stream.tag(), BasicCancelOptions::default());
    within(state.timeout, "basic.cancel", queue, async {
        cancel
            .await
            .map_err(|e| RabbitError::amqp("basic.cancel", queue, e))
    })
    .await?;
    let mut buffered = Vec::new();
    while let Some(Some(Ok(delivery))) = stream.next().now_or_never() {
        buffered.push(delivery);
    }
    Ok(buffered)
}

/// Gives back the deliveries lapin dropped before each of `raw`
/// ([`Tracker::unseen_before`]): after a consumer was cancelled on a
/// channel that stays open.
pub(super) async fn repair_gaps(tracker: &Tracker, raw: &[Raw]) {
    for delivery in raw {
        for tag in tracker.unseen_before(delivery.delivery_tag) {
            tracing::debug!(queue = %tracker.queue, tag, "giving back a delivery sent to a cancelled consumer");
            if let Err(err) = tracker.nack(tag).await {
                tracing::debug!(cause = %err, "giving back a dropped delivery failed");
            }
        }
    }
}

/// Nacks `deliveries` (never handed out) back to the queue, where other
/// consumers get them now.
pub(super) async fn give_back(
    tracker: &Tracker,
    deliveries: impl IntoIterator<Item = Raw>,
) -> usize {
    let mut given = 0;
    for delivery in deliveries {
        match tracker.nack(delivery.delivery_tag).await {
            Ok(()) => given += 1,
            Err(err) => tracing::debug!(cause = %err, "giving back a prefetched delivery failed"),
        }
    }
    given
}

/// The listener on `source` paused: gives back what its consumer had
/// prefetched and not handed out, so other consumers get those jobs now.
/// With no job of it running, the channel is closed (which gives back
/// everything, also what is still on its way). Otherwise the consumer is
/// cancelled and its buffered deliveries nacked; the running jobs keep the
/// channel for their acks, and the next receive starts a new consumer on
/// it. When the cancel fails the channel is closed instead.
pub(crate) async fn pause(inner: &Inner, source: &Source) -> Result<()> {
    let slot = inner.consumer_slot(source);
    let mut guard = slot.lock().await;
    let Some(state) = guard.as_mut() else {
        return Ok(());
    };
    if state.tracker.outstanding() == 0 {
        // No job of it running: closing the channel gives back all it
        // holds, including what is still on its way to it.
        if let Some(state) = guard.take() {
            tracing::debug!(queue = %state.tracker.queue, "listener paused: consumer channel closed");
            state.close().await;
        }
        return Ok(());
    }
    match cancel(state).await {
        Ok(buffered) => {
            repair_gaps(&state.tracker, &buffered).await;
            let given = give_back(&state.tracker, buffered).await;
            tracing::debug!(queue = %state.tracker.queue, given_back = given, "listener paused: consumer cancelled");
            Ok(())
        }
        Err(err) => {
            if let Some(state) = guard.take() {
                state.close().await;
            }
            Err(err.into())
        }
    }
}

/// Starts a new consumer when the listener's admission calls for another
/// prefetch (or after a pause): [`crate::prefetch`]. Returns the
/// deliveries the cancelled consumer had buffered, to hand out first.
pub(super) async fn resize(
    inner: &Inner,
    state: &mut ConsumerState,
    max: usize,
) -> Result<Vec<Raw>, RabbitError> {
    let target = prefetch::target(state.tracker.outstanding(), max);
    let paused = state.stream.is_none();
    let wanted = match inner.config.prefetch {
        Some(fixed) => paused.then_some(fixed),
        None if paused => Some(target),
        None => state
            .sizing
            .resize(state.prefetch, max, target, Instant::now()),
    };
    let Some(wanted) = wanted else {
        return Ok(Vec::new());
    };
    let buffered = cancel(state).await?;
    let queue = state.tracker.queue.as_str();
    if !paused {
        tracing::debug!(
            queue,
            from = state.prefetch,
            to = wanted,
            "re-sizing the consumer's prefetch"
        );
    }
    state.stream = Some(consume(&state.tracker.channel, state.timeout, queue, wanted).await?);
    state.prefetch = wanted;
    state.sizing = Sizing::default();
    state.id = idle::next_id();
    Ok(buffered)
}
