//! Declaring queues, exchanges and bindings (once per connection).

use std::time::Duration;

use lapin::options::{
    ExchangeBindOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, ExchangeKind};

use crate::config::{QueueType, RabbitConfig};
use crate::declared::{Declared, DELAY_LEVELS};
use crate::error::RabbitError;
use crate::names::{delay_bit_header, short, Names};
use crate::session::Session;

/// Arguments of the queues ezmq declares.
pub(crate) fn queue_args(config: &RabbitConfig) -> FieldTable {
    let mut args = FieldTable::default();
    if config.queue_type == QueueType::Quorum {
        args.insert("x-queue-type".into(), string(QueueType::Quorum.as_str()));
    }
    args
}

pub(crate) fn string(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

pub(crate) fn millis(d: Duration) -> AMQPValue {
    AMQPValue::LongLongInt(i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1))
}

fn queue_options(config: &RabbitConfig) -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: config.durable || config.queue_type == QueueType::Quorum,
        ..QueueDeclareOptions::default()
    }
}

fn exchange_options(config: &RabbitConfig) -> ExchangeDeclareOptions {
    ExchangeDeclareOptions {
        durable: config.durable,
        ..ExchangeDeclareOptions::default()
    }
}

/// Runs `declare` on the session's declaring channel, once per connection,
/// `what` and `name`.
async fn once<F, Fut>(
    session: &Session,
    what: Declared,
    name: &str,
    declare: F,
) -> Result<(), RabbitError>
where
    F: FnOnce(Channel) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), RabbitError>> + Send + 'static,
{
    session.declaring_once(what, name, declare).await
}

/// Declares a topic's queue.
pub(crate) async fn topic_queue(
    session: &Session,
    config: &RabbitConfig,
    queue: &str,
) -> Result<(), RabbitError> {
    let (options, args, name) = (queue_options(config), queue_args(config), queue.to_owned());
    once(session, Declared::Queue, queue, move |ch| async move {
        declare_queue(&ch, &name, options, args).await.map(drop)
    })
    .await
}

/// Declares a topic's queue again (as [`topic_queue`] does) for the
/// number of messages ready in it, which the broker answers with.
pub(crate) async fn topic_queue_len(
    session: &Session,
    config: &RabbitConfig,
    queue: &str,
) -> Result<u32, RabbitError> {
    let (options, args, name) = (queue_options(config), queue_args(config), queue.to_owned());
    session
        .declaring(queue, move |ch| async move {
            declare_queue(&ch, &name, options, args).await
        })
        .await
        .map(|declared| declared.message_count())
}

/// Forgets that a topic's queue was declared (it was deleted).
pub(crate) fn forget_topic_queue(session: &Session, queue: &str) {
    session.declared().remove(Declared::Queue, queue);
}

pub(crate) async fn declare_queue(
    channel: &Channel,
    queue: &str,
    options: QueueDeclareOptions,
    args: FieldTable,
) -> Result<lapin::Queue, RabbitError> {
    channel
        .queue_declare(short("queue", queue)?, options, args)
        .await
        .map_err(|e| RabbitError::amqp("queue.declare", queue, e))
}

/// Declares the fan-out exchange of a broadcast topic.
pub(crate) async fn fanout_exchange(
    session: &Session,
    config: &RabbitConfig,
    exchange: &str,
) -> Result<(), RabbitError> {
    let (options, name) = (exchange_options(config), exchange.to_owned());
    once(
        session,
        Declared::Exchange,
        exchange,
        move |ch| async move {
            ch.exchange_declare(
                short("exchange", &name)?,
                ExchangeKind::Fanout,
                options,
                FieldTable::default(),
            )
            .await
            .map_err(|e| RabbitError::amqp("exchange.declare", name, e))
        },
    )
    .await
}

/// Declares a consumer group's queue (expiring after `retention` unused)
/// bound to its topic's fan-out exchange.
pub(crate) async fn group_queue(
    session: &Session,
    config: &RabbitConfig,
    exchange: &str,
    queue: &str,
    retention: Duration,
) -> Result<(), RabbitError> {
    fanout_exchange(session, config, exchange).await?;
    // Declared again on every refresh: a declaration resets `x-expires`.
    let mut args = queue_args(config);
    args.insert("x-expires".into(), millis(retention));
    let options = queue_options(config);
    let (name, exchange) = (queue.to_owned(), exchange.to_owned());
    session
        .declaring(queue, move |channel| async move {
            declare_queue(&channel, &name, options, args).await?;
            channel
                .queue_bind(
                    short("queue", &name)?,
                    short("exchange", &exchange)?,
                    "".into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await
                .map_err(|e| RabbitError::amqp("queue.bind", name, e))
        })
        .await
}

/// Declares the binary delay levels: level `k` is a headers exchange and
/// a queue whose messages wait `2^k` ms (`x-message-ttl`) before being
/// dead-lettered to level `k - 1` (level 0: to the deliver exchange). A
/// message enters at the level of its delay's highest set bit; at each
/// level it goes through the queue when its bit is 1 and straight to the
/// next level's exchange when it is 0 (header `ezmq-delay-bKK`).
pub(crate) async fn delay_levels(
    session: &Session,
    config: &RabbitConfig,
    names: &Names,
) -> Result<(), RabbitError> {
    let (config, names) = (config.clone(), names.clone());
    once(
        session,
        Declared::DelayLevels,
        DELAY_LEVELS,
        move |ch| async move {
            let deliver = names.delay_deliver();
            ch.exchange_declare(
                short("exchange", &deliver)?,
                ExchangeKind::Direct,
                exchange_options(&config),
                FieldTable::default(),
            )
            .await
            .map_err(|e| RabbitError::amqp("exchange.declare", deliver.as_str(), e))?;
            for level in 0..config.delay_levels {
                let name = names.delay_level(level);
                let next = match level {
                    0 => deliver.clone(),
                    _ => names.delay_level(level - 1),
                };
                ch.exchange_declare(
                    short("exchange", &name)?,
                    ExchangeKind::Headers,
                    exchange_options(&config),
                    FieldTable::default(),
                )
                .await
                .map_err(|e| RabbitError::amqp("exchange.declare", name.as_str(), e))?;
                let mut args = queue_args(&config);
                args.insert(
                    "x-message-ttl".into(),
                    AMQPValue::LongLongInt(1i64 << level),
                );
                args.insert("x-dead-letter-exchange".into(), string(&next));
                if config.queue_type == QueueType::Quorum {
                    // Dead-lettering with confirms (RabbitMQ >= 3.10): a message
                    // never leaves a level before the next one has it.
                    args.insert("x-dead-letter-strategy".into(), string("at-least-once"));
                    args.insert("x-overflow".into(), string("reject-publish"));
                }
                declare_queue(&ch, &name, queue_options(&config), args).await?;
                let bit = delay_bit_header(level);
                ch.queue_bind(
                    short("queue", &name)?,
                    short("exchange", &name)?,
                    "".into(),
                    QueueBindOptions::default(),
                    bit_match(&bit, "1"),
                )
                .await
                .map_err(|e| RabbitError::amqp("queue.bind", name.as_str(), e))?;
                ch.exchange_bind(
                    short("exchange", &next)?,
                    short("exchange", &name)?,
                    "".into(),
                    ExchangeBindOptions::default(),
                    bit_match(&bit, "0"),
                )
                .await
                .map_err(|e| RabbitError::amqp("exchange.bind", name.as_str(), e))?;
            }
            Ok(())
        },
    )
    .await
}

fn bit_match(header: &str, value: &str) -> FieldTable {
    let mut args = FieldTable::default();
    args.insert("x-match".into(), string("all"));
    args.insert(header.into(), string(value));
    args
}

/// Binds `queue` to the deliver exchange so delayed messages reach it.
pub(crate) async fn deliver_binding(
    session: &Session,
    names: &Names,
    queue: &str,
) -> Result<(), RabbitError> {
    let (name, deliver) = (queue.to_owned(), names.delay_deliver());
    once(
        session,
        Declared::DeliverBinding,
        queue,
        move |ch| async move {
            ch.queue_bind(
                short("queue", &name)?,
                short("exchange", &deliver)?,
                short("routing key", &name)?,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| RabbitError::amqp("queue.bind", name, e))
        },
    )
    .await
}
