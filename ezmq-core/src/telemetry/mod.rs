//! Observability: spans after the OpenTelemetry messaging semantic
//! conventions, metrics through the [`metrics`](https://docs.rs/metrics) facade, and (cargo feature
//! `opentelemetry`) W3C trace context carried in message headers.
//!
//! - **Spans** (`tracing`, level INFO): `send {topic}` (kind producer)
//!   around each push, `process {topic}` (kind consumer) around each
//!   delivery attempt, with `settle` events (DEBUG) inside it for the ack,
//!   retry or dead letter. Attributes: `messaging.system`,
//!   `messaging.destination.name`, `messaging.message.id`,
//!   `messaging.consumer.group.name`, `messaging.operation.type`,
//!   `messaging.delivery.attempt`, and `error.type` with
//!   `otel.status_code = ERROR` on failure. The cron and request-reply
//!   crates add `cron {name}` and `request {topic}` spans.
//! - **Trace context** (feature `opentelemetry`): a push writes its `send`
//!   span's context as `traceparent`/`tracestate` headers; the `process`
//!   span of each delivery takes it as its OpenTelemetry parent, so producer
//!   and consumer share one trace on every backend. Install a
//!   `tracing_opentelemetry` layer in the application; without one no
//!   header is written.
//! - **Metrics** ([`names`] lists them): the application installs a
//!   `metrics` recorder (Prometheus, OpenTelemetry, ...) *before it
//!   connects*: handles are registered when a listener starts and on a
//!   topic's first push, then reused, so the hot paths never allocate.
//!   Without a recorder every update is a no-op.

mod handles;
pub mod names;
mod send;
mod spans;

#[cfg(feature = "opentelemetry")]
mod context;

use std::borrow::Cow;

use tracing::Span;

use crate::headers::Headers;
use crate::push_options::PushOptions;

pub use self::handles::{cron_tick, Telemetry};
pub(crate) use self::handles::{ListenerTelemetry, Settle};
pub(crate) use self::send::{publish, publish_batch, publish_to_groups, publish_with};
pub(crate) use self::spans::process_span;
pub use self::spans::{error_type, record_error, send_span, SpanName};

#[cfg(feature = "opentelemetry")]
pub use self::context::{extract_context, inject_context};

/// Header carrying the W3C `traceparent` of the producer's `send` span
/// (feature `opentelemetry`).
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// Header carrying the W3C `tracestate` of the producer's `send` span,
/// when it has one (feature `opentelemetry`).
pub const TRACESTATE_HEADER: &str = "tracestate";

/// `options` with `span`'s trace context in its headers, when there is one
/// to add (feature `opentelemetry`); otherwise `options` unchanged.
pub fn with_trace_context<'a>(span: &Span, options: &'a PushOptions) -> Cow<'a, PushOptions> {
    #[cfg(feature = "opentelemetry")]
    if options.headers.get(TRACEPARENT_HEADER).is_none() {
        if let Some((parent, state)) = context::trace_headers(span) {
            let mut options = options.clone();
            options.headers.insert(TRACEPARENT_HEADER, parent);
            if let Some(state) = state {
                options.headers.insert(TRACESTATE_HEADER, state);
            }
            return Cow::Owned(options);
        }
    }
    #[cfg(not(feature = "opentelemetry"))]
    let _ = span;
    Cow::Borrowed(options)
}

/// [`with_trace_context`] for the owned jobs of a batch, in place: the
/// span's trace context is read once, and a job gets it unless it carries
/// one already.
pub(crate) fn add_trace_context(span: &Span, jobs: &mut [(bytes::Bytes, PushOptions)]) {
    #[cfg(feature = "opentelemetry")]
    if let Some((parent, state)) = context::trace_headers(span) {
        for (_, options) in jobs.iter_mut() {
            if options.headers.get(TRACEPARENT_HEADER).is_none() {
                options.headers.insert(TRACEPARENT_HEADER, parent.as_str());
                if let Some(state) = &state {
                    options.headers.insert(TRACESTATE_HEADER, state.as_str());
                }
            }
        }
    }
    #[cfg(not(feature = "opentelemetry"))]
    let _ = (span, jobs);
}

/// Makes the trace context in `headers` the OpenTelemetry parent of `span`
/// (feature `opentelemetry`; without it, does nothing).
pub fn set_parent_from(span: &Span, headers: &Headers) {
    #[cfg(feature = "opentelemetry")]
    context::set_parent_from(span, headers);
    #[cfg(not(feature = "opentelemetry"))]
    let _ = (span, headers);
}
