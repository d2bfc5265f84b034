//! Spans named and attributed after the OpenTelemetry messaging semantic
//! conventions.
//!
//! Every span has a static `tracing` name (`send`, `process`, ...) and sets
//! `otel.name` to the convention's `{operation} {destination}`, which
//! `tracing-opentelemetry` exports as the span's name. Field values are only
//! evaluated when a subscriber wants the span: with none installed a span
//! costs a relaxed load and allocates nothing.

use std::fmt;

use tracing::field::Empty;
use tracing::Span;

use crate::error::Error;
use crate::job::Job;
use crate::spi::Source;
use crate::topic::Topic;

use super::names;

/// `{operation} {destination}`, formatted only when a subscriber records
/// it.
#[derive(Clone, Copy)]
pub struct SpanName<'a> {
    operation: &'static str,
    destination: &'a str,
}

impl<'a> SpanName<'a> {
    /// The name of an `operation` (`send`, `process`, ...) on
    /// `destination`.
    pub fn new(operation: &'static str, destination: &'a str) -> Self {
        SpanName {
            operation,
            destination,
        }
    }
}

impl fmt::Display for SpanName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.operation, self.destination)
    }
}

impl fmt::Debug for SpanName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The producer span of one push: `send {topic}`, kind producer. Its id
/// is the parent the consumer's `process` span gets (with the
/// `opentelemetry` feature).
pub fn send_span(system: &'static str, topic: &Topic) -> Span {
    tracing::info_span!(
        "send",
        otel.name = %SpanName::new("send", topic.as_str()),
        otel.kind = "producer",
        otel.status_code = Empty,
        "messaging.system" = system,
        "messaging.operation.type" = "send",
        "messaging.destination.name" = %topic,
        "messaging.message.id" = Empty,
        "messaging.batch.message_count" = Empty,
        "error.type" = Empty,
    )
}

/// The consumer span of one delivery attempt: `process {topic}`, kind
/// consumer. Its parent is the producer's span when the message carries a
/// trace context (with the `opentelemetry` feature); settle events (ack,
/// retry, dead letter) are recorded inside it.
pub(crate) fn process_span(system: &'static str, source: &Source, job: &Job) -> Span {
    let span = tracing::info_span!(
        "process",
        otel.name = %SpanName::new("process", source.topic().as_str()),
        otel.kind = "consumer",
        otel.status_code = Empty,
        "messaging.system" = system,
        "messaging.operation.type" = "process",
        "messaging.destination.name" = %source.topic(),
        "messaging.consumer.group.name" = source.group().map(display),
        "messaging.message.id" = %job.id(),
        "messaging.delivery.attempt" = job.attempt(),
        "error.type" = Empty,
    );
    super::set_parent_from(&span, job.headers());
    span
}

/// Marks `span` failed with `error_type` (a low-cardinality class):
/// `error.type` and `otel.status_code = ERROR`.
pub fn record_error(span: &Span, error_type: &'static str) {
    span.record(names::ERROR_TYPE, error_type);
    span.record("otel.status_code", "ERROR");
}

/// The `error.type` of an ezmq error: its variant, in snake case.
pub fn error_type(err: &Error) -> &'static str {
    match err {
        Error::InvalidTopic { .. } => "invalid_topic",
        Error::InvalidOption { .. } => "invalid_option",
        Error::PayloadTooLarge { .. } => "payload_too_large",
        Error::QueueFull { .. } => "queue_full",
        Error::QueueClosedForInput { .. } => "queue_closed_for_input",
        Error::Connect { .. } => "connect",
        Error::Backend { .. } => "backend",
        Error::OutcomeUnknown { .. } => "outcome_unknown",
        Error::Json(_) => "json",
        Error::Timeout(_) => names::ERROR_TIMEOUT,
        Error::NoReply { .. } => "no_reply",
        Error::Shutdown => "shutdown",
        Error::Unsupported { .. } => "unsupported",
        Error::BatchRejected { .. } => "batch_rejected",
        Error::Duplicate { .. } => "duplicate",
        Error::Remote { .. } => "remote",
    }
}
