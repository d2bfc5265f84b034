//! Metric names, span attribute keys and their fixed values.
//!
//! Names follow the OpenTelemetry messaging semantic conventions where one
//! exists; ezmq's own live under `ezmq.*`. A Prometheus exporter turns the
//! dots into underscores (and may add a unit suffix): `ezmq.messages.retried`
//! is scraped as `ezmq_messages_retried`.

/// Counter: messages the broker confirmed (a failed push counts too,
/// labelled [`ERROR_TYPE`]). OpenTelemetry `messaging.client.sent.messages`.
pub const SENT_MESSAGES: &str = "messaging.client.sent.messages";

/// Counter: messages delivered to a handler (each delivery attempt).
/// OpenTelemetry `messaging.client.consumed.messages`.
pub const CONSUMED_MESSAGES: &str = "messaging.client.consumed.messages";

/// Histogram, seconds: one handler run, labelled [`ERROR_TYPE`] when it
/// failed. OpenTelemetry `messaging.process.duration`.
pub const PROCESS_DURATION: &str = "messaging.process.duration";

/// Histogram, seconds: one push until the broker confirmed it, labelled
/// `messaging.operation.name = send` (and [`ERROR_TYPE`] on failure).
/// OpenTelemetry `messaging.client.operation.duration`.
pub const OPERATION_DURATION: &str = "messaging.client.operation.duration";

/// Counter: failed attempts handed back to come again after a backoff.
pub const RETRIED_MESSAGES: &str = "ezmq.messages.retried";

/// Counter: jobs that failed for good (out of attempts, or a permanent
/// error), labelled [`ERROR_TYPE`].
pub const DEAD_LETTERED_MESSAGES: &str = "ezmq.messages.dead_lettered";

/// Gauge: handlers running right now, per listener.
pub const IN_FLIGHT_HANDLERS: &str = "ezmq.handlers.in_flight";

/// Gauge: messages waiting in a listened topic, sampled every
/// [`ConsumeOptions::queue_depth_every`](crate::ConsumeOptions::queue_depth_every)
/// on backends that count them
/// ([`QueueStats`](crate::spi::QueueStats)).
pub const QUEUE_DEPTH: &str = "ezmq.queue.depth";

/// Counter: cron ticks, labelled [`CRON_NAME`] and [`CRON_OUTCOME`]
/// (`run`, `skipped`, `missed`).
pub const CRON_TICKS: &str = "ezmq.cron.ticks";

/// Histogram, seconds: a request-reply call from send to reply (or
/// failure, labelled [`ERROR_TYPE`]).
pub const REQUEST_DURATION: &str = "ezmq.request.duration";

/// Attribute and label: the broker, from
/// [`Backend::name`](crate::spi::Backend::name) (`disque`, `redis`,
/// `rabbitmq`).
pub const SYSTEM: &str = "messaging.system";

/// Attribute and label: the topic.
pub const DESTINATION: &str = "messaging.destination.name";

/// Attribute and label: the broadcast group a listener belongs to.
pub const CONSUMER_GROUP: &str = "messaging.consumer.group.name";

/// Attribute: `send`, `process` or `settle`.
pub const OPERATION_TYPE: &str = "messaging.operation.type";

/// Label of [`OPERATION_DURATION`]: the operation (`send`).
pub const OPERATION_NAME: &str = "messaging.operation.name";

/// Attribute: the message id.
pub const MESSAGE_ID: &str = "messaging.message.id";

/// Attribute: the number of messages a batch push sent.
pub const BATCH_COUNT: &str = "messaging.batch.message_count";

/// Attribute: the delivery attempt, from 1.
pub const DELIVERY_ATTEMPT: &str = "messaging.delivery.attempt";

/// Attribute and label: why an operation failed (a low-cardinality class
/// such as [`ERROR_HANDLER`], never the error message).
pub const ERROR_TYPE: &str = "error.type";

/// Label of [`CRON_TICKS`]: the cron job's name.
pub const CRON_NAME: &str = "ezmq.cron.name";

/// Label of [`CRON_TICKS`]: `run`, `skipped` or `missed`.
pub const CRON_OUTCOME: &str = "ezmq.cron.outcome";

/// [`ERROR_TYPE`] of a handler that returned an error or panicked.
pub const ERROR_HANDLER: &str = "handler_error";

/// [`ERROR_TYPE`] of a handler that returned a
/// [`Permanent`](crate::Permanent) error.
pub const ERROR_PERMANENT: &str = "permanent";

/// [`ERROR_TYPE`] of a handler aborted at the end of a stop's grace period.
pub const ERROR_ABORTED: &str = "aborted";

/// [`ERROR_TYPE`] of a push or request the broker did not take, or that
/// got no answer.
pub const ERROR_BROKER: &str = "broker_error";

/// [`ERROR_TYPE`] of a request that got no reply in time.
pub const ERROR_TIMEOUT: &str = "timeout";
