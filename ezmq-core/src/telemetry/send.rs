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

/// Publishes job `id` (already stamped into `options`) of `topic` to
/// `queue` (the topic, or its priority lane) through `backend` in a
/// `send {topic}` span, with the span's trace context in the headers
/// (feature `opentelemetry`), and counts it in `telemetry`.
pub(crate) async fn publish(
    telemetry: &Telemetry,
    backend: &dyn Backend,
    topic: &Topic,
    queue: &Topic,
    body: Bytes,
    options: &PushOptions,
    id: &JobId,
) -> Result<()> {
    let span = send_span(backend.name(), topic);
    span.record(names::MESSAGE_ID, display(id));
    let options = with_trace_context(&span, options);
    instrumented(
        telemetry,
        topic,
        &span,
        backend.publish(queue, body, &options),
    )
    .await
    .map(|_| ())
}

/// [`publish`] with `store` in place of [`Backend::publish`]: `store`
/// gets the options with the span's trace context, and runs in the span.
pub(crate) async fn publish_with<Fut>(
    telemetry: &Telemetry,
    system: &'static str,
    topic: &Topic,
    options: &PushOptions,
    id: &JobId,
    store: impl FnOnce(PushOptions) -> Fut,
) -> Result<()>
where
    Fut: Future<Output = Result<()>>,
{
    let span = send_span(system, topic);
    span.record(names::MESSAGE_ID, display(id));
    let options = with_trace_context(&span, options).into_owned();
    instrumented(telemetry, topic, &span, store(options)).await
}

/// Publishes a batch (each job already stamped) through
/// [`Backend::publish_batch`] in one `send {topic}` span whose trace
/// context every job carries; counts each job sent or failed.
pub(crate) async fn publish_batch(
    telemetry: &Telemetry,
    backend: &dyn Backend,
    topic: &Topic,
    queue: &Topic,
    jobs: Vec<(Bytes, PushOptions)>,
) -> Vec<Result<JobId>> {
    let span = send_span(backend.name(), topic);
    span.record(names::BATCH_COUNT, jobs.len());
    let mut jobs = jobs;
    super::add_trace_context(&span, &mut jobs);
    let started = Instant::now();
    let sent = backend
        .publish_batch(queue, &jobs)
        .instrument(span.clone())
        .await;
    let stored = sent.iter().filter(|result| result.is_ok()).count();
    telemetry.sent_many(topic, started, stored);
    for err in sent.iter().filter_map(|result| result.as_ref().err()) {
        // Only the span's error type is kept: the last failure's.
        count(telemetry, topic, &span, started, Some(err));
    }
    sent
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
    id: &JobId,
) -> Result<Option<usize>> {
    let span = send_span(system, topic);
    span.record(names::MESSAGE_ID, display(id));
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
    count(telemetry, topic, span, started, sent.as_ref().err());
    sent
}

/// Counts one job sent (`failure` is `None`) or failed, recording the
/// failure's type on `span`.
fn count(
    telemetry: &Telemetry,
    topic: &Topic,
    span: &Span,
    started: Instant,
    failure: Option<&crate::Error>,
) {
    match failure {
        None => telemetry.sent(topic, started),
        Some(err) => {
            let error_type = error_type(err);
            record_error(span, error_type);
            telemetry.send_failed(topic, started, error_type);
        }
    }
}
