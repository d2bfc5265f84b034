//! What the observability tests share: a thread-local OpenTelemetry
//! exporter and metrics recorder, and reading spans and metrics back.

#![allow(dead_code)]

use std::time::Duration;

use ezmq::telemetry::names;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::Value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tokio::sync::mpsc;
use tracing_subscriber::layer::SubscriberExt;

pub(crate) const BOUND: Duration = Duration::from_secs(20);

pub(crate) fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{SystemTime, UNIX_EPOCH};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("obs-{prefix}-{nanos:x}-{:x}-{n}", std::process::id())
}

pub(crate) async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>, what: &str) -> T {
    tokio::time::timeout(BOUND, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap_or_else(|| panic!("channel closed waiting for {what}"))
}

/// Everything the test observes, installed on this thread only.
pub(crate) struct Observed {
    pub(crate) exporter: InMemorySpanExporter,
    pub(crate) provider: SdkTracerProvider,
    pub(crate) snapshotter: Snapshotter,
}

impl Observed {
    pub(crate) fn spans(&self) -> Vec<SpanData> {
        self.exporter.get_finished_spans().expect("finished spans")
    }

    /// The metrics recorded so far (a snapshot drains the recorder: take
    /// one, at the end).
    pub(crate) fn metrics(&self) -> Metrics {
        Metrics(self.snapshotter.snapshot().into_vec())
    }
}

pub(crate) type Entry = (
    metrics_util::CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
);

/// One snapshot of the metrics.
pub(crate) struct Metrics(Vec<Entry>);

impl Metrics {
    /// The value of metric `name` whose labels include `labels` (and no
    /// `error.type` unless `labels` names one).
    pub(crate) fn metric(
        &self,
        kind: MetricKind,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Option<&DebugValue> {
        self.0
            .iter()
            .find(|(key, _, _, _)| {
                key.kind() == kind
                    && key.key().name() == name
                    && labels
                        .iter()
                        .all(|(k, v)| key.key().labels().any(|l| l.key() == *k && l.value() == *v))
                    && (labels.iter().any(|(k, _)| *k == names::ERROR_TYPE)
                        || !key.key().labels().any(|l| l.key() == names::ERROR_TYPE))
            })
            .map(|(_, _, _, value)| value)
    }

    pub(crate) fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match self.metric(MetricKind::Counter, name, labels) {
            Some(DebugValue::Counter(n)) => *n,
            None => 0,
            other => panic!("{name}: not a counter: {other:?}"),
        }
    }

    pub(crate) fn histogram_len(&self, name: &str, labels: &[(&str, &str)]) -> usize {
        match self.metric(MetricKind::Histogram, name, labels) {
            Some(DebugValue::Histogram(values)) => values.len(),
            None => 0,
            other => panic!("{name}: not a histogram: {other:?}"),
        }
    }
}

pub(crate) fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

pub(crate) fn attr_str(span: &SpanData, key: &str) -> String {
    attr(span, key)
        .map(|v| v.as_str().into_owned())
        .unwrap_or_default()
}

/// Installs, on this thread, an OpenTelemetry layer exporting to memory
/// and a debugging metrics recorder. Keep the guards alive.
pub(crate) fn observe() -> (
    Observed,
    tracing::subscriber::DefaultGuard,
    &'static DebuggingRecorder,
) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::filter::LevelFilter::DEBUG)
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("observability-test")));
    let guard = tracing::subscriber::set_default(subscriber);
    // Leaked: the local-recorder guard borrows it for the whole test.
    let recorder: &'static DebuggingRecorder = Box::leak(Box::new(DebuggingRecorder::new()));
    let observed = Observed {
        exporter,
        provider,
        snapshotter: recorder.snapshotter(),
    };
    (observed, guard, recorder)
}

pub(crate) fn span_names(spans: &[SpanData]) -> Vec<String> {
    spans.iter().map(|s| s.name.to_string()).collect()
}

pub(crate) fn redis_url() -> String {
    std::env::var("EZMQ_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

pub(crate) fn amqp_url() -> String {
    std::env::var("EZMQ_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}
