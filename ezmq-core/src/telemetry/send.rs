//! A push, instrumented: `send` span, trace context, metrics.

use std::time::Instant;

use bytes::Bytes;
use tracing::field::display;
use tracing::Instrument;

use crate::error::Result;
use crate::job::JobId;
use crate::push_options::PushOptions;
use crate::spi::Backend;
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
    let started = Instant::now();
    let published = backend
        .publish(topic, body, &options)
        .instrument(span.clone())
        .await;
    match &published {
        Ok(id) => {
            span.record(names::MESSAGE_ID, display(id));
            telemetry.sent(topic, started);
        }
        Err(err) => {
            let error_type = error_type(err);
            record_error(&span, error_type);
            telemetry.send_failed(topic, started, error_type);
        }
    }
    published
}
