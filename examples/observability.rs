//! Traces and metrics: a producer's span and the consumer's span share one
//! OpenTelemetry trace across the broker, and a Prometheus scrape shows
//! the messaging metrics. Runs on an embedded Disque-compatible server (or
//! the broker in `EZMQ_URL`).
//!
//! ```sh
//! cargo run --example observability
//! ```
//!
//! The application installs everything (ezmq only emits): a
//! `tracing-opentelemetry` layer (here exporting to memory, in a service an
//! OTLP exporter) and a `metrics` recorder (here Prometheus) — both
//! *before* connecting. ezmq's `opentelemetry` cargo feature carries the
//! trace context in the message headers. It exits by itself in a few
//! seconds.

#[allow(dead_code)] // its `init_logging`: this example sets up its own subscriber
mod support;

use std::time::Duration;

use anyhow::Context as _;
use ezmq::prelude::*;
use ezmq::{ConsumeOptions, Job, Permanent};
use metrics_exporter_prometheus::PrometheusBuilder;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tokio::sync::mpsc;
use tracing::{info, Instrument};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The trace id of the current span, as OpenTelemetry exports it.
fn current_trace_id() -> String {
    let cx = tracing::Span::current().context();
    format!("{:032x}", cx.span().span_context().trace_id())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // 1. Traces: log lines to stdout, spans to an OpenTelemetry exporter.
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_target(false)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout())),
        )
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("observability-example")))
        .init();
    // 2. Metrics: a Prometheus recorder, installed before connecting.
    let prometheus = PrometheusBuilder::new()
        .install_recorder()
        .context("install the Prometheus recorder")?;

    let (url, server) = support::broker().await?;
    let client = ezmq::connect_url(&url).await?;
    let run = std::process::id();
    let topic = format!("observability.orders.{run}");

    // 3. A consumer: prints the trace id its `process` span belongs to.
    //    "retry-me" fails once (a retry), "broken" fails for good (a dead
    //    letter).
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new()
                .with_max_attempts(3)
                .with_backoff(Duration::from_millis(100), Duration::from_millis(200)),
            move |job: Job| {
                let tx = tx.clone();
                async move {
                    let body = String::from_utf8_lossy(job.body()).into_owned();
                    if body == "order-1" {
                        info!(trace_id = %current_trace_id(), "[consumer] trace of order-1");
                    }
                    let result = match (body.as_str(), job.attempt()) {
                        ("retry-me", 1) => Err(ezmq::BoxError::from("downstream busy")),
                        ("broken", _) => Err(Permanent::new("malformed order").into()),
                        _ => Ok(()),
                    };
                    let _ = tx.send((body, job.attempt(), result.is_ok()));
                    result
                }
            },
        )
        .await?;
    let dead_topic = format!("{topic}.dead-letter");
    let (dead_tx, mut dead_rx) = mpsc::unbounded_channel();
    client
        .add_consume_listener(&dead_topic, move |_job: Job| {
            let dead_tx = dead_tx.clone();
            async move {
                let _ = dead_tx.send(());
                Ok::<(), std::io::Error>(())
            }
        })
        .await?;

    // 4. A producer: pushes inside an application span ("checkout").
    let checkout = tracing::info_span!("checkout");
    async {
        info!(trace_id = %current_trace_id(), "[producer] trace of order-1");
        client.push(&topic, "order-1".into()).await?;
        client.push(&topic, "retry-me".into()).await?;
        client.push(&topic, "broken".into()).await?;
        anyhow::Ok(())
    }
    .instrument(checkout)
    .await?;

    let deadline = Duration::from_secs(15);
    let mut pending = ["order-1", "retry-me", "broken"].len();
    while pending > 0 {
        let (body, attempt, ok) = tokio::time::timeout(deadline, rx.recv())
            .await
            .context("the consumer did not get every message in time")?
            .context("listener gone")?;
        info!(%body, attempt, ok, "[consumer] handled");
        if ok || body == "broken" {
            pending -= 1;
        }
    }
    tokio::time::timeout(deadline, dead_rx.recv())
        .await
        .context("no dead letter in time")?;
    client.shutdown(Duration::from_secs(5)).await?;
    drop(server);

    // 5. The exported spans of order-1's trace: the producer's `send` and
    //    the consumer's `process`, parent and child across the broker.
    let mut spans = exporter.get_finished_spans().context("exported spans")?;
    spans.sort_by_key(|s| s.start_time);
    let _ = provider.shutdown();
    let order_trace = spans
        .iter()
        .find(|s| s.name == "checkout")
        .map(|s| s.span_context.trace_id())
        .context("no checkout span")?;
    println!("\n# spans of trace {order_trace:032x}");
    for span in spans
        .iter()
        .filter(|s| s.span_context.trace_id() == order_trace)
    {
        println!(
            "{:<48} kind={:<8} trace={:032x} span={:016x} parent={:016x}",
            span.name,
            format!("{:?}", span.span_kind),
            span.span_context.trace_id(),
            span.span_context.span_id(),
            span.parent_span_id,
        );
    }

    // 6. What a Prometheus scrape of this process returns.
    println!("\n# Prometheus scrape (summaries' quantile lines left out)");
    for line in prometheus.render().lines() {
        if (line.starts_with("messaging_") || line.starts_with("ezmq_"))
            && !line.contains("quantile=")
        {
            println!("{line}");
        }
    }
    println!("\n[done] one trace from producer to consumer, metrics scraped");
    Ok(())
}
