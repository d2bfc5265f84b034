//! A push, instrumented: `send` span, trace context, metrics.

use std::future::Future;
use std::time::Instant;

use bytes::Bytes;
use tracing::field::display;
use tracing::{Instrument, Span};

use crate::error::Result;
use crate::job::JobId;
use crate::push_options::PushOptions;
use crate::spi::{Backend, FanOut};
use crate::topic::Topic;

use super::handles::Telemetry;
use super::{error_type, names, record_error, send_span, with_trace_context};

/// Publishes through `backend` in a `send {topic}` span, with the span's
/// trace context in the headers (feature `opentelemetry`), and counts it in
/// `telemetry`.
pub(crate) async fn publish(
    telemetry: &Telemetry,
    backend: &dyn Backend,
    topic: &Topic,
    body: Bytes,
    options: &PushOptions,
) -> Result<JobId> {
    let span = send_span(backend.name(), topic);
    let options = with_trace_context(&span, options);
    let published = instrumented(
        telemetry,
        topic,
        &span,
        backend.publish(topic, body, &options),
    )
    .await;
    if let Ok(id) = &published {
        span.record(names::MESSAGE_ID, display(id));
    }
    published
}

/// A broadcast: [`FanOut::publish_to_groups`] in the same `send {topic}`
/// span, trace context and metrics as [`publish`], so every group's
/// consumer joins the producer's trace.
pub(crate) async fn publish_to_groups(
    telemetry: &Telemetry,
    system: &'static str,
    fan_out: &dyn FanOut,
    topic: &Topic,
    body: Bytes,
    options: &PushOptions,
) -> Result<Option<usize>> {
    let span = send_span(system, topic);
    let options = with_trace_context(&span, options);
    instrumented(
        telemetry,
        topic,
        &span,
        fan_out.publish_to_groups(topic, body, &options),
    )
    .await
}

/// Runs `send` in `span`, counting it sent or failed.
async fn instrumented<T>(
    telemetry: &Telemetry,
    topic: &Topic,
    span: &Span,
    send: impl Future<Output = Result<T>>,
) -> Result<T> {
    let started = Instant::now();
    let sent = send.instrument(span.clone()).await;
    match &sent {
        Ok(_) => telemetry.sent(topic, started),
        Err(err) => {
            let error_type = error_type(err);
            record_error(span, error_type);
            telemetry.send_failed(topic, started, error_type);
        }
    }
    sent
}
