//! One consumer per source: its channel, prefetch and delivery stream.

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ezmq_core::spi::{Delivery, Source};
use ezmq_core::{Job, JobId, Result, ATTEMPT_HEADER};
use futures::{FutureExt, StreamExt};
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Consumer};

use crate::backend::Inner;
use crate::delivery::{Message, RabbitDelivery, Tracker};
use crate::error::RabbitError;
use crate::idle;
use crate::names::short;
use crate::prefetch::{self, Sizing};
use crate::publish::{self, Outgoing, EXPIRES_AT_HEADER, REMAINING_HEADER};
use crate::session::{close_channel, within, Session};
use crate::topology;

mod restart;

pub(crate) use restart::pause;
use restart::{give_back, repair_gaps, resize};

/// A consumer channel on one queue and its consumer.
pub(crate) struct ConsumerState {
    generation: u64,
    /// The `basic.consume` consumer; `None` once cancelled (the listener
    /// paused): the channel stays open for the acks of the jobs still
    /// running, and the next receive starts a new consumer on it.
    stream: Option<Consumer>,
    tracker: Arc<Tracker>,
    prefetch: u16,
    /// When to re-size the prefetch ([`crate::prefetch`]).
    sizing: Sizing,
    /// This consumer's id ([`crate::idle`]), new with every
    /// `basic.consume`.
    id: u64,
    /// When the last receive on it ended.
    last_receive: Instant,
    /// The session's operation timeout, bounding the close and cancel.
    timeout: Duration,
}

impl fmt::Debug for ConsumerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsumerState")
            .field("generation", &self.generation)
            .field("tracker", &self.tracker)
            .field("prefetch", &self.prefetch)
            .finish()
    }
}

/// A delivery as lapin hands it over.
type Raw = lapin::message::Delivery;

/// The slot of one source: `None` until the first receive, and again once
/// the channel died or was closed (the next receive opens a new one).
pub(crate) type Slot = Arc<tokio::sync::Mutex<Option<ConsumerState>>>;

impl ConsumerState {
    /// Closes the consumer's channel: its unacknowledged messages go back
    /// to the queue.
    pub(crate) async fn close(self) {
        let (channel, queue) = (&self.tracker.channel, &self.tracker.queue);
        if let Err(err) = close_channel(channel, self.timeout, queue, "consumer closed").await {
            tracing::debug!(cause = %err, "closing a consumer channel failed");
        }
    }

    /// True while consumer `id` is this one (active, or cancelled by a
    /// pause and not started again).
    pub(crate) fn is_watched_by(&self, id: u64) -> bool {
        self.id == id
    }

    /// True when no receive ran for `idle` and none of its deliveries is
    /// still being handled.
    pub(crate) fn is_idle(&self, idle: Duration) -> bool {
        self.last_receive.elapsed() >= idle && self.tracker.outstanding() == 0
    }

    /// The queue it consumes.
    pub(crate) fn queue(&self) -> &str {
        &self.tracker.queue
    }

    fn is_usable(&self, session: &Session) -> bool {
        self.generation == session.generation && self.tracker.channel.status().connected()
    }
}

/// The queue a source reads.
pub(crate) fn queue_of(inner: &Inner, source: &Source) -> String {
    match source.group() {
        Some(group) => inner.names.group_queue(source.topic(), group),
        None => inner.names.topic_queue(source.topic()).into_owned(),
    }
}

async fn open(
    inner: &Inner,
    session: &Session,
    source: &Source,
    queue: &str,
    prefetch: u16,
) -> Result<ConsumerState, RabbitError> {
    if source.group().is_none() {
        topology::topic_queue(session, &inner.config, queue).await?;
    }
    let channel = session.channel().await?;
    let stream = consume(&channel, session.timeout(), queue, prefetch).await?;
    Ok(ConsumerState {
        generation: session.generation,
        stream: Some(stream),
        tracker: Arc::new(Tracker::new(channel, queue.to_owned())),
        prefetch,
        sizing: Sizing::default(),
        id: idle::next_id(),
        last_receive: Instant::now(),
        timeout: session.timeout(),
    })
}

/// Starts a consumer on `channel` with a prefetch of its own. Per consumer
/// (quorum queues refuse a channel-wide limit); RabbitMQ applies it to the
/// consumers started after it on the channel, so it is fixed for the
/// consumer's life, and a re-size starts a new consumer
/// ([`crate::prefetch`]).
async fn consume(
    channel: &Channel,
    timeout: Duration,
    queue: &str,
    prefetch: u16,
) -> Result<Consumer, RabbitError> {
    let qos = channel.basic_qos(prefetch, BasicQosOptions { global: false });
    within(timeout, "basic.qos", queue, async {
        qos.await
            .map_err(|e| RabbitError::amqp("basic.qos", queue, e))
    })
    .await?;
    let consume = channel.basic_consume(
        short("queue", queue)?,
        "".into(),
        BasicConsumeOptions::default(),
        FieldTable::default(),
    );
    let stream = within(timeout, "basic.consume", queue, async {
        consume
            .await
            .map_err(|e| RabbitError::amqp("basic.consume", queue, e))
    })
    .await?;
    tracing::debug!(queue, prefetch, "consumer started");
    Ok(stream)
}

/// Takes up to `max` deliveries from `source`'s consumer, waiting up to
/// `wait` for the first. Deliveries not taken stay in the consumer's
/// buffer (unacknowledged on its channel); the stream is cancel safe, so a
/// dropped call loses nothing. The consumer is started on the first call
/// with a prefetch of `max` (or [`RabbitConfig::prefetch`](crate::RabbitConfig::prefetch)),
/// again after a pause, and re-sized as [`crate::prefetch`] says.
pub(crate) async fn receive(
    inner: &Arc<Inner>,
    source: &Source,
    max: usize,
    wait: Duration,
) -> Result<Vec<Delivery>> {
    let max = max.max(1);
    let slot = inner.consumer_slot(source);
    let mut guard = slot.lock().await;
    let before = guard.as_ref().map(|state| state.id);
    let received = receive_locked(inner, source, &mut guard, max, wait).await;
    if let Some(state) = guard.as_mut() {
        state.last_receive = Instant::now();
        if before != Some(state.id) && state.stream.is_some() {
            idle::watch(Arc::downgrade(&slot), state.id);
        }
    }
    received
}

/// [`receive`] with the source's slot locked.
async fn receive_locked(
    inner: &Arc<Inner>,
    source: &Source,
    guard: &mut Option<ConsumerState>,
    max: usize,
    wait: Duration,
) -> Result<Vec<Delivery>> {
    let session = inner.connector.session().await?;
    let usable = guard.as_ref().is_some_and(|c| c.is_usable(&session));
    if !usable {
        *guard = None;
        let queue = queue_of(inner, source);
        let prefetch = inner
            .config
            .prefetch
            .unwrap_or_else(|| prefetch::target(0, max));
        match open(inner, &session, source, &queue, prefetch).await {
            Ok(state) => *guard = Some(state),
            Err(err) => {
                if err.is_not_found() {
                    topology::forget_topic_queue(&session, &queue);
                }
                if !session.is_alive() {
                    inner.connector.invalidate(session.generation);
                }
                return Err(err.into());
            }
        }
    }
    let Some(state) = guard.as_mut() else {
        return Ok(Vec::new());
    };
    let mut raw = match resize(inner, state, max).await {
        Ok(buffered) => buffered,
        Err(err) => {
            // A channel that failed a cancel or consume is closed (its
            // unacked deliveries return); the next receive opens another.
            if let Some(state) = guard.take() {
                state.close().await;
            }
            if !session.is_alive() {
                inner.connector.invalidate(session.generation);
            }
            return Err(err.into());
        }
    };
    let Some(stream) = state.stream.as_mut() else {
        return Ok(Vec::new());
    };
    if raw.is_empty() {
        let mut failed = None;
        match tokio::time::timeout(wait, stream.next()).await {
            Err(_) => return Ok(Vec::new()),
            Ok(Some(Ok(delivery))) => raw.push(delivery),
            Ok(Some(Err(err))) => failed = Some(err),
            Ok(None) => failed = None,
        }
        if raw.is_empty() {
            *guard = None;
            return match failed {
                Some(err) => {
                    inner.connector.invalidate(session.generation);
                    Err(RabbitError::amqp("basic.consume", queue_of(inner, source), err).into())
                }
                // Cancelled by the broker (queue deleted): start over next time.
                None => Ok(Vec::new()),
            };
        }
    }
    while raw.len() < max {
        match stream.next().now_or_never() {
            Some(Some(Ok(delivery))) => raw.push(delivery),
            Some(Some(Err(err))) => {
                tracing::warn!(
                    topic = %source.topic(),
                    cause = %err,
                    "consumer failed; it restarts at the next fetch"
                );
                break;
            }
            _ => break,
        }
    }
    repair_gaps(&state.tracker, &raw).await;
    if raw.len() > max {
        // Buffered by a consumer re-sized smaller: the excess goes back.
        let excess = raw.split_off(max);
        give_back(&state.tracker, excess).await;
    }
    let tracker = Arc::clone(&state.tracker);
    let mut out = Vec::with_capacity(raw.len());
    let now = publish::unix_millis();
    for delivery in raw {
        let table = delivery.properties.headers().as_ref();
        if publish::header_u64(table, EXPIRES_AT_HEADER).is_some_and(|at| at <= now) {
            // A delayed message whose TTL ran out while it waited.
            let _ = tracker
                .channel
                .basic_ack(delivery.delivery_tag, BasicAckOptions::default())
                .await;
            continue;
        }
        if let Some(rest) = publish::header_u64(table, REMAINING_HEADER).filter(|r| *r > 0) {
            reschedule(inner, &tracker, &delivery, rest, now).await;
            continue;
        }
        tracker.hand_out(delivery.delivery_tag);
        out.push(into_delivery(inner, source, &tracker, delivery));
    }
    Ok(out)
}

/// Sends a message whose delay is longer than one pass through the delay
/// levels through them again, then acks this copy (nacks it back to the
/// queue when that fails).
async fn reschedule(
    inner: &Arc<Inner>,
    tracker: &Tracker,
    delivery: &lapin::message::Delivery,
    rest_ms: u64,
    now: u64,
) {
    let table = delivery.properties.headers().as_ref();
    let headers = publish::headers_of(table);
    let ttl = publish::header_u64(table, EXPIRES_AT_HEADER)
        .map(|at| Duration::from_millis(at.saturating_sub(now).max(1)));
    let message_id = publish::delivered_id(&headers, &delivery.properties);
    let out = Outgoing {
        topic: &tracker.queue,
        queue: &tracker.queue,
        body: &delivery.data,
        headers: &headers,
        message_id: &message_id,
        delay: Some(Duration::from_millis(rest_ms)),
        ttl,
        declare: false,
    };
    let tag = delivery.delivery_tag;
    let settled = match publish::send(inner, &out).await {
        Ok(()) => {
            tracker
                .channel
                .basic_ack(tag, BasicAckOptions::default())
                .await
        }
        Err(err) => {
            // Nothing lost: the nack puts the message back.
            tracing::warn!(
                topic = %tracker.queue,
                %message_id,
                attempt = headers.attempt().unwrap_or(1),
                cause = %err,
                "could not send a long delay through the levels again; back in the queue to try again"
            );
            tracker
                .channel
                .basic_nack(
                    tag,
                    lapin::options::BasicNackOptions {
                        multiple: false,
                        requeue: true,
                    },
                )
                .await
        }
    };
    if let Err(err) = settled {
        tracing::debug!(cause = %err, "settling a rescheduled delivery failed");
    }
}

/// The attempt number of a delivery: the attempt recorded by the last
/// retry (`ezmq-attempt`, 1 when absent), plus the broker's count of
/// deliveries that ended without a settle since (quorum queues'
/// `x-delivery-count`; on classic queues 1 when `redelivered` is set).
pub(crate) fn attempt_of(
    recorded: Option<u32>,
    delivery_count: Option<u64>,
    redelivered: bool,
) -> u32 {
    let base = recorded.unwrap_or(1).max(1);
    let extra = match delivery_count {
        Some(count) => u32::try_from(count).unwrap_or(u32::MAX),
        None => u32::from(redelivered),
    };
    base.saturating_add(extra)
}

fn into_delivery(
    inner: &Arc<Inner>,
    source: &Source,
    tracker: &Arc<Tracker>,
    delivery: lapin::message::Delivery,
) -> Delivery {
    let table = delivery.properties.headers().as_ref();
    let headers = publish::headers_of(table);
    let attempt = attempt_of(
        headers.attempt(),
        publish::header_u64(table, "x-delivery-count"),
        delivery.redelivered,
    );
    // The job id core stamped, else the AMQP message id, else a new one.
    let message_id = publish::delivered_id(&headers, &delivery.properties);
    let body = Bytes::from(delivery.data);
    let job = Job::new(
        JobId::new(message_id.clone()),
        source.topic().clone(),
        body.clone(),
    )
    .with_headers(headers.clone())
    .with_attempt(attempt);
    let mut retry_headers = headers;
    retry_headers.remove(ATTEMPT_HEADER);
    Delivery::new(
        job,
        RabbitDelivery {
            inner: Arc::clone(inner),
            tracker: Arc::clone(tracker),
            tag: delivery.delivery_tag,
            settled: AtomicBool::new(false),
            message: Message {
                body,
                headers: retry_headers,
                message_id,
                attempt,
            },
        },
    )
}

#[cfg(test)]
mod tests {
    use super::attempt_of;

    #[test]
    fn attempts_count_retries_and_redeliveries() {
        assert_eq!(attempt_of(None, None, false), 1);
        assert_eq!(attempt_of(None, None, true), 2);
        assert_eq!(attempt_of(Some(3), None, false), 3);
        assert_eq!(attempt_of(Some(3), Some(2), true), 5);
        assert_eq!(attempt_of(Some(0), Some(0), true), 1);
    }
}
