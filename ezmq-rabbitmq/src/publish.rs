//! Publishing with confirms: immediate, or through the delay levels.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ezmq_core::{Headers, JobId, PushOptions, Result, MESSAGE_ID_HEADER};
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable};
use lapin::PublisherConfirm;
use lapin::{BasicProperties, Confirmation};

use crate::backend::Inner;
use crate::declared::{Declared, DELAY_LEVELS};
use crate::error::RabbitError;
use crate::names::{delay_bit_header, short};
use crate::session::Session;
use crate::topology::{self, string};

/// Header holding the deadline (Unix ms) of a delayed message with a TTL:
/// the per-message `expiration` cannot go through the delay levels (it
/// would dead-letter the message early), so consumers drop it after this.
pub(crate) const EXPIRES_AT_HEADER: &str = "ezmq-expires-at";

/// Header holding the delay (ms) still to wait after this pass through
/// the delay levels, for delays longer than one pass holds: the consumer
/// that receives it sends it through the levels again.
pub(crate) const REMAINING_HEADER: &str = "ezmq-delay-remaining";

/// One message to send to a queue.
#[derive(Debug)]
pub(crate) struct Outgoing<'a> {
    /// The topic (or queue) errors name.
    pub(crate) topic: &'a str,
    /// The destination queue.
    pub(crate) queue: &'a str,
    pub(crate) body: &'a [u8],
    pub(crate) headers: &'a Headers,
    pub(crate) message_id: &'a str,
    pub(crate) delay: Option<Duration>,
    pub(crate) ttl: Option<Duration>,
    /// Declare the queue first (topics), or assume it exists (retries of
    /// a queue being consumed, whose arguments may differ).
    pub(crate) declare: bool,
}

/// Whole milliseconds of `d`, rounded up: a delay is never shortened.
pub(crate) fn ceil_millis(d: Duration) -> u64 {
    let ms = d.as_nanos().div_ceil(1_000_000);
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// Publishes and waits for the broker's confirm. A connection that turns
/// out dead before the message left is replaced and the publish tried
/// again (once the message may have left, a lost connection or a missing
/// confirm is [`ezmq_core::Error::OutcomeUnknown`] instead); so is a nack (the
/// broker did not store the message: a quorum queue without a leader yet,
/// just after it was declared or during a leader election), up to
/// [`NACK_RETRIES`] times with a short backoff.
pub(crate) async fn send(inner: &Inner, out: &Outgoing<'_>) -> Result<()> {
    let mut nacks = 0;
    loop {
        let session = inner.connector.session().await?;
        match send_on(inner, &session, out).await {
            Ok(()) => return Ok(()),
            Err(err @ RabbitError::Unconfirmed { .. }) => {
                // Sent, maybe stored: sending it again could store it twice.
                if !session.is_alive() {
                    inner.connector.invalidate(session.generation);
                }
                return Err(outcome_unknown(out, err));
            }
            Err(err) if !session.is_alive() => {
                tracing::debug!(cause = %err, "connection lost during a publish; reconnecting");
                inner.connector.invalidate(session.generation);
                let session = inner.connector.session().await?;
                // Boxed: a second `send_on` inline would double the size of
                // every publish's future.
                return Box::pin(send_on(inner, &session, out))
                    .await
                    .map_err(|err| outcome_unknown(out, err));
            }
            Err(RabbitError::Nacked { target }) if nacks < NACK_RETRIES => {
                nacks += 1;
                tracing::debug!(%target, nacks, "publish nacked; trying again");
                tokio::time::sleep(Duration::from_millis(50 << nacks)).await;
            }
            Err(err) => return Err(err.into()),
        }
    }
}

/// `err` as an [`ezmq_core::Error`], naming the topic when the outcome is
/// unknown.
pub(crate) fn outcome_unknown(out: &Outgoing<'_>, err: RabbitError) -> ezmq_core::Error {
    match err {
        RabbitError::Unconfirmed { .. } => ezmq_core::Error::outcome_unknown(out.topic, err),
        err => err.into(),
    }
}

/// How many nacks of one publish [`send`] absorbs.
const NACK_RETRIES: u32 = 4;

async fn send_on(inner: &Inner, session: &Session, out: &Outgoing<'_>) -> Result<(), RabbitError> {
    let (exchange, properties) = prepare(inner, session, out).await?;
    confirm(session, &exchange, out.queue, out.body, properties, true).await
}

/// Declares what `out` needs (its queue, the delay levels) unless done on
/// this session, and builds its exchange and properties: the default
/// exchange for an immediate message, the entry level for a delayed one.
pub(crate) async fn prepare(
    inner: &Inner,
    session: &Session,
    out: &Outgoing<'_>,
) -> Result<(String, BasicProperties), RabbitError> {
    let config = &inner.config;
    // The declarations are boxed (and skipped once done): inline, their
    // futures would be copied with every publish's.
    if out.declare && !session.declared().contains(Declared::Queue, out.queue) {
        Box::pin(topology::topic_queue(session, config, out.queue)).await?;
    }
    let total_ms = out.delay.map_or(0, ceil_millis);
    let max_ms = u64::try_from(config.max_delay().as_millis()).unwrap_or(u64::MAX);
    // One pass holds up to `max_ms`, its padding included.
    let room = max_ms.saturating_sub(u64::from(config.delay_levels)).max(1);
    let pass_ms = total_ms.min(room);
    let delay_ms = padded(pass_ms).min(max_ms);
    let mut table = header_table(out.headers)?;
    let mut properties = BasicProperties::default()
        .with_message_id(short("message id", out.message_id)?)
        .with_delivery_mode(if config.persistent { 2 } else { 1 });
    let exchange = if delay_ms == 0 {
        if let Some(ttl) = out.ttl {
            properties = properties.with_expiration(ceil_millis(ttl).to_string().into());
        }
        String::new()
    } else {
        if !session
            .declared()
            .contains(Declared::DelayLevels, DELAY_LEVELS)
        {
            Box::pin(topology::delay_levels(session, config, &inner.names)).await?;
        }
        if !session
            .declared()
            .contains(Declared::DeliverBinding, out.queue)
        {
            Box::pin(topology::deliver_binding(session, &inner.names, out.queue)).await?;
        }
        if let Some(ttl) = out.ttl {
            let deadline = unix_millis().saturating_add(ceil_millis(ttl));
            table.insert(EXPIRES_AT_HEADER.into(), string(&deadline.to_string()));
        }
        if total_ms > pass_ms {
            table.insert(
                REMAINING_HEADER.into(),
                string(&(total_ms - pass_ms).to_string()),
            );
        }
        let top = top_level(delay_ms);
        for level in 0..=top {
            let bit = if delay_ms >> level & 1 == 1 { "1" } else { "0" };
            table.insert(delay_bit_header(level).into(), string(bit));
        }
        inner.names.delay_level(top)
    };
    Ok((exchange, properties.with_headers(table)))
}

/// The time a delay of `ms` spends in the levels: `ms` plus 1 ms for each
/// level queue it then goes through (each set bit of the result). A level
/// may let a message go up to a millisecond before its `x-message-ttl`
/// (the broker keeps enqueue times in whole milliseconds), and a 500 ms
/// delay passes six of them, so without the padding it could end almost
/// 2 ms early. The smallest such value: at most `ms + 32`.
pub(crate) fn padded(ms: u64) -> u64 {
    if ms == 0 {
        return 0;
    }
    let mut padded = ms;
    loop {
        let next = ms.saturating_add(u64::from(padded.count_ones()));
        if next <= padded {
            return padded;
        }
        padded = next;
    }
}

/// The level a delay of `ms` (> 0) enters at: its highest set bit.
pub(crate) fn top_level(ms: u64) -> u8 {
    u8::try_from(63 - ms.leading_zeros()).unwrap_or(63)
}

/// Publishes on the confirm channel and turns the confirm into a result.
pub(crate) async fn confirm(
    session: &Session,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    properties: BasicProperties,
    mandatory: bool,
) -> Result<(), RabbitError> {
    // One operation timeout for the publish and its confirm.
    let deadline = tokio::time::Instant::now() + session.timeout();
    let sent = start(
        session,
        exchange,
        routing_key,
        body,
        properties,
        mandatory,
        deadline,
    )
    .await?;
    sent.confirmed(deadline).await
}

/// A message handed to the connection whose confirm is still to come.
pub(crate) struct Sent {
    target: String,
    pending: PublisherConfirm,
}

/// Sends one message on the confirm channel without waiting for its
/// confirm ([`Sent::confirmed`] does). A publish that lapin refused was
/// not sent (an ordinary error); from the moment it may have left, a
/// missing confirm leaves its fate unknown ([`RabbitError::Unconfirmed`]).
pub(crate) async fn start(
    session: &Session,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    properties: BasicProperties,
    mandatory: bool,
    deadline: tokio::time::Instant,
) -> Result<Sent, RabbitError> {
    let target = if exchange.is_empty() {
        routing_key
    } else {
        exchange
    };
    let channel = session.publisher().await?;
    let (exchange, routing_key) = (
        short("exchange", exchange)?,
        short("routing key", routing_key)?,
    );
    let options = BasicPublishOptions {
        mandatory,
        ..BasicPublishOptions::default()
    };
    let pending = match tokio::time::timeout_at(
        deadline,
        channel.basic_publish(exchange, routing_key, options, body, properties),
    )
    .await
    {
        Ok(Ok(pending)) => pending,
        Ok(Err(e)) => return Err(RabbitError::amqp("basic.publish", target, e)),
        Err(_) => {
            return Err(RabbitError::Unconfirmed {
                target: target.to_owned(),
                cause: Box::new(RabbitError::Timeout {
                    op: "basic.publish",
                    target: target.to_owned(),
                }),
            })
        }
    };
    Ok(Sent {
        target: target.to_owned(),
        pending,
    })
}

impl Sent {
    /// Waits (until `deadline`) for the broker's confirm.
    pub(crate) async fn confirmed(self, deadline: tokio::time::Instant) -> Result<(), RabbitError> {
        let Sent { target, pending } = self;
        let unconfirmed = |cause| RabbitError::Unconfirmed {
            target: target.clone(),
            cause: Box::new(cause),
        };
        let confirm = match tokio::time::timeout_at(deadline, pending).await {
            Ok(Ok(confirm)) => confirm,
            Ok(Err(e)) => return Err(unconfirmed(RabbitError::amqp("confirm", &target, e))),
            Err(_) => {
                return Err(unconfirmed(RabbitError::Timeout {
                    op: "confirm",
                    target: target.clone(),
                }))
            }
        };
        match confirm {
            Confirmation::Ack(None) | Confirmation::NotRequested => Ok(()),
            Confirmation::Ack(Some(returned)) => Err(RabbitError::Returned {
                target,
                code: returned.reply_code,
                text: returned.reply_text.to_string(),
            }),
            Confirmation::Nack(_) => Err(RabbitError::Nacked { target }),
        }
    }
}

/// ezmq headers as AMQP headers (long strings).
pub(crate) fn header_table(headers: &Headers) -> Result<FieldTable, RabbitError> {
    let mut table = FieldTable::default();
    for (name, value) in headers.iter() {
        table.insert(short("header", name)?, string(value));
    }
    Ok(table)
}

/// AMQP headers as ezmq headers: strings and numbers kept, the broker's
/// own (`x-…`) and the delay plumbing left out.
pub(crate) fn headers_of(table: Option<&FieldTable>) -> Headers {
    let mut headers = Headers::new();
    let Some(table) = table else {
        return headers;
    };
    for (name, value) in table.inner() {
        let name: &str = name.as_str();
        if name.starts_with("x-") || name.starts_with("ezmq-delay-") || name == EXPIRES_AT_HEADER {
            continue;
        }
        if let Some(value) = value_string(value) {
            headers.insert(name, value);
        }
    }
    headers
}

/// A header value as text, when it is a string or a number.
pub(crate) fn value_string(value: &AMQPValue) -> Option<String> {
    Some(match value {
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        AMQPValue::ShortString(s) => s.as_str().to_owned(),
        AMQPValue::ShortShortInt(n) => n.to_string(),
        AMQPValue::ShortShortUInt(n) => n.to_string(),
        AMQPValue::ShortInt(n) => n.to_string(),
        AMQPValue::ShortUInt(n) => n.to_string(),
        AMQPValue::LongInt(n) => n.to_string(),
        AMQPValue::LongUInt(n) => n.to_string(),
        AMQPValue::LongLongInt(n) => n.to_string(),
        AMQPValue::Timestamp(n) => n.to_string(),
        AMQPValue::Boolean(b) => b.to_string(),
        _ => return None,
    })
}

/// A header as a number.
pub(crate) fn header_u64(table: Option<&FieldTable>, name: &str) -> Option<u64> {
    let value = table?.inner().get(name)?;
    value_string(value)?.parse().ok()
}

pub(crate) fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The id of a push, for its AMQP `message_id` and as what `publish`
/// returns: the one core stamped into the headers
/// ([`MESSAGE_ID_HEADER`]), else the producer's message id, else (a
/// backend called without core's producer pipeline) a new UUIDv7.
pub(crate) fn push_id(options: &PushOptions) -> JobId {
    if let Some(id) = options.stamped_id() {
        return id;
    }
    match &options.message_id {
        Some(id) => JobId::new(id.as_str()),
        None => JobId::generate(),
    }
}

/// The id of a delivered job: the job id its push stamped
/// ([`MESSAGE_ID_HEADER`]), else the AMQP `message_id` (a message that
/// another AMQP client published), else a new UUIDv7 for a foreign message
/// without either. A retry or long-delay pass carries it on as the
/// `message_id`, so such a message keeps the one it got here.
pub(crate) fn delivered_id(headers: &Headers, properties: &BasicProperties) -> String {
    if let Some(id) = headers.get(MESSAGE_ID_HEADER) {
        return id.to_owned();
    }
    match properties.message_id() {
        Some(id) => id.as_str().to_owned(),
        None => JobId::generate().as_str().to_owned(),
    }
}

/// A new id for what is not a job (a reply, a claim): a random (v4)
/// UUID, hyphenated.
pub(crate) fn new_message_id() -> String {
    let mut buf = uuid::Uuid::encode_buffer();
    uuid::Uuid::new_v4()
        .hyphenated()
        .encode_lower(&mut buf)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_round_up_and_pick_levels() {
        assert_eq!(ceil_millis(Duration::from_micros(1)), 1);
        assert_eq!(ceil_millis(Duration::from_millis(1000)), 1000);
        assert_eq!(top_level(1), 0);
        assert_eq!(top_level(1000), 9);
        assert_eq!(top_level(3_600_000), 21);
    }

    #[test]
    fn padding_covers_every_level_passed() {
        assert_eq!(padded(0), 0);
        for ms in [1u64, 2, 500, 1000, 4095, 65_535, 3_600_000, (1 << 32) - 40] {
            let p = padded(ms);
            assert!(p >= ms + u64::from(p.count_ones()), "{ms} -> {p}");
            assert!(p <= ms + 32, "{ms} -> {p}");
        }
    }

    #[test]
    fn headers_round_trip_without_plumbing() {
        let headers: Headers = [("tenant", "acme"), ("ezmq-attempt", "2")]
            .into_iter()
            .collect();
        let mut table = header_table(&headers).unwrap();
        table.insert("x-death".into(), AMQPValue::Void);
        table.insert("ezmq-delay-b03".into(), string("1"));
        table.insert("x-delivery-count".into(), AMQPValue::LongInt(2));
        assert_eq!(headers_of(Some(&table)), headers);
        assert_eq!(header_u64(Some(&table), "x-delivery-count"), Some(2));
    }
}
