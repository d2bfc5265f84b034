//! Span and latency metric of a request (see [`ezmq_core::telemetry`]).

use std::future::Future;
use std::time::Instant;

use ezmq_core::spi::Runtime;
use ezmq_core::telemetry::{error_type, names, record_error, SpanName};
use ezmq_core::{Result, Topic};
use tracing::field::Empty;
use tracing::Instrument;
use uuid::Uuid;

/// Runs `call`, the request `id` to `topic`, in a `request {topic}` span
/// (kind client; the `send` span of the request message is its child, so
/// the responder's `process` span joins the trace), and records its
/// latency in `ezmq.request.duration`.
pub(crate) async fn instrument<T>(
    runtime: &Runtime,
    topic: &Topic,
    id: Uuid,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    let system = runtime.backend().name();
    let span = tracing::info_span!(
        "request",
        otel.name = %SpanName::new("request", topic.as_str()),
        otel.kind = "client",
        otel.status_code = Empty,
        "messaging.system" = system,
        "messaging.destination.name" = %topic,
        "error.type" = Empty,
        correlation_id = %id,
    );
    let started = Instant::now();
    let result = call.instrument(span.clone()).await;
    let seconds = started.elapsed().as_secs_f64();
    match &result {
        Ok(_) => runtime
            .telemetry()
            .histogram(names::REQUEST_DURATION, topic)
            .record(seconds),
        Err(err) => {
            let error_type = error_type(err);
            record_error(&span, error_type);
            // A failure is rare: its handle is registered each time.
            metrics::histogram!(
                names::REQUEST_DURATION,
                names::SYSTEM => system,
                names::DESTINATION => topic.as_str().to_owned(),
                names::ERROR_TYPE => error_type,
            )
            .record(seconds);
        }
    }
    result
}
