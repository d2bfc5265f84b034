//! Keyed claims ([`ExclusiveClaim::claim`](ezmq_core::spi::ExclusiveClaim::claim),
//! `holder`, `release`): a *gate* queue that decides who holds a key and a
//! *record* queue that names the holder.
//!
//! # The gate decides
//!
//! The gate (`<prefix>__ezmq|hold|<key>`) is a durable classic queue with
//! `x-max-length` 1 and `x-overflow` `reject-publish`. A claim publishes its
//! token there with a confirm and a per-message `expiration` of `hold`:
//! the broker stores the first message and nacks every other while it
//! is there, so the ack names exactly one winner, and the claim ends `hold`
//! after the winning publish (later attempts do not extend it). A classic
//! queue is one process on one node taking publishes in order, so this is
//! exact on a cluster too (the same reason as
//! [`try_claim`](ezmq_core::spi::ExclusiveClaim::try_claim)'s queue, which is
//! left as it is: claim queues with its arguments exist on brokers).
//!
//! # Nobody reads the gate
//!
//! AMQP 0-9-1 has no peek: a `basic.get` takes the message out of the
//! ready state until it is acked or requeued, and **`x-max-length` counts
//! ready messages only**. While any reader had the winner's message out, a
//! concurrent claim would be accepted: a second winner, and two messages
//! once the first is requeued. So the gate is read only by `release`, and
//! only after the record named the caller (below). Its state is read with
//! a `queue.declare`, whose `message_count` (1: held, 0: free) touches no
//! message and is exact under any number of concurrent readers.
//!
//! # The record names the holder
//!
//! The winner then publishes its token to the record
//! (`<prefix>__ezmq|holder|<key>`, `x-max-length` 1, `drop-head`), expiring
//! a little before the gate's message does. Readers take the token with a
//! `basic.get` and requeue it at once. A reader that finds the record empty
//! while the gate is held (the winner has not written it yet, a release is
//! under way, the last milliseconds of a hold, or a reader in another
//! process has the message out for a round trip) looks again, for up to
//! [`READ_PATIENCE`]; only then does `holder` fail, with the retryable
//! [`RabbitError::HolderUnknown`] — never `None` while the gate is held.
//! Readers of one connection take turns on its declaring channel, so they
//! never hide the record from each other. A winner that cannot record its
//! token gives the claim back and fails; one that dies between the two
//! publishes leaves the key held with no readable token until the hold ends
//! (`claim` then answers `Held(None)`, `holder` fails, and `release` with
//! that token still frees it, reading the gate itself).
//!
//! # Release
//!
//! `release` takes the record's message: not the caller's token, it is
//! requeued (`false`). When it is, it takes the gate's message, checks it
//! names the caller too, and acks the record's message, then the gate's
//! (in that order: a connection lost in between leaves the gate held with
//! an empty record, never a record naming a token that does not hold the
//! key). Both queues are then deleted when empty (`if-empty`: a claim that
//! came in meanwhile keeps them); a claim that finds its queue deleted under
//! it declares it again.
//!
//! Queue arguments cannot depend on `hold` (`holder` and `release` do not
//! know it and must declare the same queues), so the queues expire
//! (`x-expires`) a day longer than [`MAX_CLAIM_HOLD`] after their last use.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ezmq_core::spi::{ClaimOutcome, MAX_CLAIM_HOLD};
use ezmq_core::{Result, Topic};
use lapin::message::BasicGetMessage;
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicNackOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel};

use crate::backend::Inner;
use crate::error::RabbitError;
use crate::names::short;
use crate::publish::{self, ceil_millis};
use crate::session::{close_channel, Session};
use crate::topology::{self, millis, string};

/// `x-expires` of both queues: longer than any hold.
const QUEUE_EXPIRES: Duration = Duration::from_secs(MAX_CLAIM_HOLD.as_secs() + 24 * 3600);

/// How much sooner than the gate's message the record's expires, so a
/// record never outlives its claim.
const RECORD_MARGIN: Duration = Duration::from_millis(20);

/// How long a read waits for the record of a held claim.
pub(crate) const READ_PATIENCE: Duration = Duration::from_secs(1);

/// Claim attempts when the gate changes under a caller (freed after its
/// publish was refused, or deleted between its declaration and publish).
const ATTEMPTS: usize = 4;

/// The two queues of one key.
#[derive(Clone, Debug)]
struct Queues {
    gate: String,
    record: String,
}

impl Queues {
    fn of(inner: &Inner, key: &Topic) -> Self {
        Queues {
            gate: inner.names.hold_queue(key),
            record: inner.names.holder_queue(key),
        }
    }
}

/// What one look at a key found.
enum Look {
    /// The gate is empty.
    Free,
    /// The gate is held; the record's token when it could be read.
    Held(Option<String>),
}

/// What one release attempt found.
enum Taken {
    NotHeld,
    /// Held under another token.
    Other,
    /// Held, and the record is empty for now.
    Pending,
    Released,
}

/// Takes `key` under `token` for `hold` (see the module documentation).
pub(crate) async fn claim(
    inner: &Inner,
    key: &Topic,
    token: &str,
    hold: Duration,
) -> Result<ClaimOutcome> {
    inner.ensure_open()?;
    let session = inner.connector.session().await?;
    let queues = Queues::of(inner, key);
    let outcome = claim_on(&session, &queues, token, hold.min(MAX_CLAIM_HOLD)).await;
    if let Ok(outcome) = &outcome {
        tracing::debug!(%key, ?outcome, "keyed claim");
    }
    finish(inner, &session, outcome)
}

/// The token `key` is held under.
pub(crate) async fn holder(inner: &Inner, key: &Topic) -> Result<Option<String>> {
    inner.ensure_open()?;
    let session = inner.connector.session().await?;
    let queues = Queues::of(inner, key);
    let holder = read_holder(&session, &queues).await;
    finish(inner, &session, holder)
}

/// Frees `key` when `token` holds it.
pub(crate) async fn release(inner: &Inner, key: &Topic, token: &str) -> Result<bool> {
    inner.ensure_open()?;
    let session = inner.connector.session().await?;
    let queues = Queues::of(inner, key);
    let released = release_on(&session, &queues, token).await;
    if let Ok(released) = released {
        tracing::debug!(%key, released, "keyed claim release");
    }
    finish(inner, &session, released)
}

fn finish<T>(inner: &Inner, session: &Session, outcome: Result<T, RabbitError>) -> Result<T> {
    outcome.map_err(|err| {
        if !session.is_alive() {
            inner.connector.invalidate(session.generation);
        }
        err.into()
    })
}

async fn claim_on(
    session: &Session,
    queues: &Queues,
    token: &str,
    hold: Duration,
) -> Result<ClaimOutcome, RabbitError> {
    for _ in 0..ATTEMPTS {
        declare_both(session, queues).await?;
        let started = Instant::now();
        match publish_token(session, &queues.gate, token, hold).await {
            Ok(()) => {
                let left = hold
                    .saturating_sub(started.elapsed())
                    .saturating_sub(RECORD_MARGIN);
                if let Err(err) = record(session, queues, token, left).await {
                    give_back(session, queues, token).await;
                    return Err(err);
                }
                return Ok(ClaimOutcome::Won);
            }
            Err(RabbitError::Nacked { .. }) => match read_holder(session, queues).await {
                Ok(Some(holder)) => return Ok(ClaimOutcome::Held(Some(holder))),
                // Freed since: try again.
                Ok(None) => {}
                Err(RabbitError::HolderUnknown { .. }) => return Ok(ClaimOutcome::Held(None)),
                Err(err) => return Err(err),
            },
            // Deleted by a release between our declaration and publish.
            Err(RabbitError::Returned { .. }) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(ClaimOutcome::Held(None))
}

/// Writes the winner's token to the record (declared again once if a
/// release deleted it meanwhile).
async fn record(
    session: &Session,
    queues: &Queues,
    token: &str,
    ttl: Duration,
) -> Result<(), RabbitError> {
    match publish_token(session, &queues.record, token, ttl).await {
        Err(RabbitError::Returned { .. }) => {
            declare_both(session, queues).await?;
            publish_token(session, &queues.record, token, ttl).await
        }
        done => done,
    }
}

/// Frees a claim its winner could not record; failures only leave it held
/// until its hold ends.
async fn give_back(session: &Session, queues: &Queues, token: &str) {
    match take(session, queues, token, true).await {
        Ok(Taken::Released) => remove(session, queues).await,
        Ok(_) => {}
        Err(err) => {
            tracing::warn!(queue = %queues.gate, cause = %err,
                "could not give back a claim whose holder was not recorded; it stays held until its hold ends");
        }
    }
}

async fn read_holder(session: &Session, queues: &Queues) -> Result<Option<String>, RabbitError> {
    let deadline = Instant::now() + READ_PATIENCE;
    loop {
        match look(session, queues).await? {
            Look::Free => return Ok(None),
            Look::Held(Some(token)) => return Ok(Some(token)),
            Look::Held(None) if Instant::now() >= deadline => {
                return Err(RabbitError::HolderUnknown {
                    key: queues.gate.clone(),
                })
            }
            Look::Held(None) => tokio::time::sleep(step()).await,
        }
    }
}

async fn release_on(session: &Session, queues: &Queues, token: &str) -> Result<bool, RabbitError> {
    let deadline = Instant::now() + READ_PATIENCE;
    loop {
        // After waiting that long for a record, read the gate itself.
        let read_gate = Instant::now() >= deadline;
        match take(session, queues, token, read_gate).await? {
            Taken::Released => {
                remove(session, queues).await;
                return Ok(true);
            }
            Taken::NotHeld | Taken::Other => return Ok(false),
            Taken::Pending => tokio::time::sleep(step()).await,
        }
    }
}

/// The gate's `message_count` and, when held, the record's token.
async fn look(session: &Session, queues: &Queues) -> Result<Look, RabbitError> {
    let (q, limit) = (queues.clone(), session.timeout());
    session
        .declaring(&queues.gate, move |ch| async move {
            let looked = look_on(&ch, &q).await;
            closing_on_error(&ch, limit, looked).await
        })
        .await
}

async fn look_on(ch: &Channel, q: &Queues) -> Result<Look, RabbitError> {
    if declare(ch, &q.gate, "reject-publish").await? == 0 {
        return Ok(Look::Free);
    }
    declare(ch, &q.record, "drop-head").await?;
    let Some(entry) = get(ch, &q.record).await? else {
        return Ok(Look::Held(None));
    };
    let token = body(&entry);
    settle(&entry, &q.record, false).await?;
    Ok(Look::Held(Some(token)))
}

/// One release attempt: the record must name `token` (or, with
/// `read_gate`, be empty), then the gate must too.
async fn take(
    session: &Session,
    queues: &Queues,
    token: &str,
    read_gate: bool,
) -> Result<Taken, RabbitError> {
    let (q, token, limit) = (queues.clone(), token.to_owned(), session.timeout());
    session
        .declaring(&queues.gate, move |ch| async move {
            let taken = take_on(&ch, &q, &token, read_gate).await;
            closing_on_error(&ch, limit, taken).await
        })
        .await
}

async fn take_on(
    ch: &Channel,
    q: &Queues,
    token: &str,
    read_gate: bool,
) -> Result<Taken, RabbitError> {
    if declare(ch, &q.gate, "reject-publish").await? == 0 {
        return Ok(Taken::NotHeld);
    }
    declare(ch, &q.record, "drop-head").await?;
    let entry = get(ch, &q.record).await?;
    match &entry {
        Some(e) if body(e) != token => {
            settle(e, &q.record, false).await?;
            return Ok(Taken::Other);
        }
        None if !read_gate => return Ok(Taken::Pending),
        _ => {}
    }
    let Some(gate) = get(ch, &q.gate).await? else {
        // The hold ended meanwhile: drop our stale record.
        if let Some(e) = &entry {
            settle(e, &q.record, true).await?;
        }
        return Ok(Taken::NotHeld);
    };
    if body(&gate) != token {
        settle(&gate, &q.gate, false).await?;
        if let Some(e) = &entry {
            settle(e, &q.record, false).await?;
        }
        return Ok(Taken::Other);
    }
    if let Some(e) = &entry {
        settle(e, &q.record, true).await?;
    }
    settle(&gate, &q.gate, true).await?;
    Ok(Taken::Released)
}

/// `done`, closing `ch` first when it is an error: a message got on it
/// must not stay out (a gate message held out would let a second claim
/// in); closing the channel requeues it.
async fn closing_on_error<T>(
    ch: &Channel,
    limit: Duration,
    done: Result<T, RabbitError>,
) -> Result<T, RabbitError> {
    if let Err(err) = &done {
        if let Err(close) = close_channel(ch, limit, "keyed claim", "keyed claim failed").await {
            tracing::debug!(cause = %err, close = %close, "closing a failed claim read's channel failed");
        }
    }
    done
}

/// Deletes both queues when empty; a claim made meanwhile keeps them.
async fn remove(session: &Session, queues: &Queues) {
    let q = queues.clone();
    let removed = session
        .declaring(&queues.gate, move |ch| async move {
            for name in [&q.gate, &q.record] {
                let options = QueueDeleteOptions {
                    if_empty: true,
                    ..QueueDeleteOptions::default()
                };
                ch.queue_delete(short("queue", name)?, options)
                    .await
                    .map_err(|e| RabbitError::amqp("queue.delete", name.as_str(), e))?;
            }
            Ok(())
        })
        .await;
    if let Err(err) = removed {
        tracing::debug!(queue = %queues.gate, cause = %err, "released claim's queues kept");
    }
}

async fn declare_both(session: &Session, queues: &Queues) -> Result<(), RabbitError> {
    let q = queues.clone();
    session
        .declaring(&queues.gate, move |ch| async move {
            declare(&ch, &q.gate, "reject-publish").await?;
            declare(&ch, &q.record, "drop-head").await.map(drop)
        })
        .await
}

/// Declares one of the queues; its ready messages.
async fn declare(ch: &Channel, queue: &str, overflow: &str) -> Result<u32, RabbitError> {
    let mut args = FieldTable::default();
    args.insert("x-queue-type".into(), string("classic"));
    args.insert("x-max-length".into(), AMQPValue::LongInt(1));
    args.insert("x-overflow".into(), string(overflow));
    args.insert("x-expires".into(), millis(QUEUE_EXPIRES));
    let options = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    topology::declare_queue(ch, queue, options, args)
        .await
        .map(|q| q.message_count())
}

/// Publishes `token` to `queue` with a confirm, expiring after `ttl`.
async fn publish_token(
    session: &Session,
    queue: &str,
    token: &str,
    ttl: Duration,
) -> Result<(), RabbitError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let properties = BasicProperties::default()
        .with_message_id(short("message id", &publish::new_message_id())?)
        .with_delivery_mode(2)
        .with_timestamp(now)
        .with_expiration(ceil_millis(ttl).max(1).to_string().into());
    publish::confirm(session, "", queue, token.as_bytes(), properties, true).await
}

async fn get(ch: &Channel, queue: &str) -> Result<Option<BasicGetMessage>, RabbitError> {
    ch.basic_get(short("queue", queue)?, BasicGetOptions { no_ack: false })
        .await
        .map_err(|e| RabbitError::amqp("basic.get", queue, e))
}

/// Acks (`remove`) or requeues a message got from `queue`.
async fn settle(message: &BasicGetMessage, queue: &str, remove: bool) -> Result<(), RabbitError> {
    let acker = &message.delivery.acker;
    let done = if remove {
        acker.ack(BasicAckOptions::default()).await
    } else {
        acker
            .nack(BasicNackOptions {
                requeue: true,
                ..BasicNackOptions::default()
            })
            .await
    };
    done.map(drop)
        .map_err(|e| RabbitError::amqp(if remove { "basic.ack" } else { "basic.nack" }, queue, e))
}

fn body(message: &BasicGetMessage) -> String {
    String::from_utf8_lossy(&message.delivery.data).into_owned()
}

/// 5 to 15 ms, random: readers of other processes do not retry in step.
fn step() -> Duration {
    let random = RandomState::new().build_hasher().finish();
    Duration::from_millis(5 + random % 11)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_outlive_any_hold_within_broker_timers() {
        assert!(QUEUE_EXPIRES > MAX_CLAIM_HOLD);
        // RabbitMQ's timers take at most 2^32 - 1 ms.
        assert!(QUEUE_EXPIRES.as_millis() < u128::from(u32::MAX));
    }

    #[test]
    fn steps_are_bounded() {
        for _ in 0..100 {
            let s = step();
            assert!(s >= Duration::from_millis(5) && s <= Duration::from_millis(15));
        }
    }
}
