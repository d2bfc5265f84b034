//! Observability on every backend: a consumer's `process` span joins the
//! producer's trace through the message headers, settle events are
//! recorded in it, and each metric moves (one push → sent +1, one retry →
//! retried +1, one dead letter → dead-lettered +1, ...). Cron, request-
//! reply and broadcast spans: `observability_cron_request.rs`.
//!
//! Each test runs on a current-thread runtime with a thread-local tracing
//! subscriber and metrics recorder, so tests in this binary do not see
//! each other's spans and metrics.

use std::time::Duration;

use ezmq::prelude::*;
use ezmq::telemetry::names;
use ezmq::{ConsumeOptions, Job, Permanent};
use ezmq_disque_server::{EmbeddedDisque, ServerConfig};
use metrics_util::debugging::DebugValue;
use metrics_util::MetricKind;
use opentelemetry::trace::SpanKind;
use opentelemetry_sdk::trace::SpanData;
use tokio::sync::mpsc;

mod observe;
mod support;
use observe::*;
use support::connect;

/// Push, consume, retry and dead letter against `url`.
async fn check(url: &str, backend: &str) {
    let (observed, _tracing, recorder) = observe();
    let _metrics = metrics::set_default_local_recorder(recorder);
    let Some(client) = connect(url, backend).await else {
        return;
    };
    let topic = unique("orders");
    let dead_topic = format!("{topic}.dead-letter");

    let (tx, mut rx) = mpsc::unbounded_channel::<(String, u32)>();
    let seen = tx.clone();
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new()
                .with_max_attempts(2)
                .with_backoff(Duration::from_millis(50), Duration::from_millis(100)),
            move |job: Job| {
                let seen = seen.clone();
                async move {
                    let body = String::from_utf8_lossy(job.body()).into_owned();
                    let _ = seen.send((body.clone(), job.attempt()));
                    match body.as_str() {
                        "fail" => Err(Box::new(std::io::Error::other("boom")) as ezmq::BoxError),
                        "permanent" => Err(Box::new(Permanent::new(std::io::Error::other("bad")))
                            as ezmq::BoxError),
                        _ => Ok(()),
                    }
                }
            },
        )
        .await
        .expect("listener");
    let (dead_tx, mut dead_rx) = mpsc::unbounded_channel::<()>();
    client
        .add_consume_listener(&dead_topic, move |_job: Job| {
            let dead_tx = dead_tx.clone();
            async move {
                let _ = dead_tx.send(());
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .expect("dead-letter listener");

    // One message in an application span: its trace must reach the handler.
    let root = tracing::info_span!("checkout");
    let root_trace = {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        root.context().span().span_context().trace_id()
    };
    let ok_id = {
        use tracing::Instrument;
        client
            .push(&topic, "ok".into())
            .instrument(root.clone())
            .await
            .expect("push ok")
    };
    drop(root);
    assert_eq!(recv(&mut rx, "ok").await, ("ok".to_owned(), 1));
    client.push(&topic, "fail".into()).await.expect("push fail");
    assert_eq!(recv(&mut rx, "fail #1").await, ("fail".to_owned(), 1));
    assert_eq!(recv(&mut rx, "fail #2").await, ("fail".to_owned(), 2));
    recv(&mut dead_rx, "the dead letter").await;
    client
        .push(&topic, "permanent".into())
        .await
        .expect("push permanent");
    assert_eq!(
        recv(&mut rx, "permanent").await,
        ("permanent".to_owned(), 1)
    );
    recv(&mut dead_rx, "the permanent dead letter").await;
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");

    // Spans: `send` is a producer span in the application's trace, and
    // the consumer's `process` span is its child, across the broker.
    let spans = observed.spans();
    let _ = observed.provider.shutdown();
    let named =
        |name: String| -> Vec<&SpanData> { spans.iter().filter(|s| s.name == name).collect() };
    let sends = named(format!("send {topic}"));
    assert_eq!(
        sends.len(),
        3,
        "one send span per push: {:#?}",
        span_names(&spans)
    );
    let send_ok = sends
        .iter()
        .find(|s| s.span_context.trace_id() == root_trace)
        .expect("the first push's send span is in the application's trace");
    assert_eq!(send_ok.span_kind, SpanKind::Producer);
    assert_eq!(attr_str(send_ok, names::SYSTEM), backend);
    assert_eq!(attr_str(send_ok, names::DESTINATION), topic);
    assert_eq!(attr_str(send_ok, names::OPERATION_TYPE), "send");
    assert_eq!(attr_str(send_ok, names::MESSAGE_ID), ok_id.as_str());

    let processes = named(format!("process {topic}"));
    assert_eq!(processes.len(), 4, "ok, fail twice, permanent");
    let process_ok = processes
        .iter()
        .find(|s| s.span_context.trace_id() == root_trace)
        .expect("the consumer span carries the producer's trace id");
    assert_eq!(process_ok.parent_span_id, send_ok.span_context.span_id());
    assert!(process_ok.parent_span_is_remote);
    assert_eq!(process_ok.span_kind, SpanKind::Consumer);
    assert_eq!(attr_str(process_ok, names::SYSTEM), backend);
    assert_eq!(attr_str(process_ok, names::OPERATION_TYPE), "process");
    assert_eq!(attr_str(process_ok, names::MESSAGE_ID), ok_id.as_str());
    assert_eq!(
        attr(process_ok, names::DELIVERY_ATTEMPT).map(|v| v.to_string()),
        Some("1".to_owned())
    );
    let events =
        |s: &SpanData| -> Vec<String> { s.events.iter().map(|e| e.name.to_string()).collect() };
    assert!(
        events(process_ok).contains(&"settle: ack".to_owned()),
        "{:?}",
        events(process_ok)
    );
    // Each failing attempt is its own span in the trace of its own push.
    let failing: Vec<_> = processes
        .iter()
        .filter(|s| attr_str(s, names::ERROR_TYPE) == names::ERROR_HANDLER)
        .collect();
    assert_eq!(failing.len(), 2, "two failed attempts");
    for s in &failing {
        assert_eq!(s.status, opentelemetry::trace::Status::error(""));
        assert_ne!(s.span_context.trace_id(), root_trace);
    }
    let settles: Vec<String> = failing.iter().flat_map(|s| events(s)).collect();
    assert!(settles.contains(&"settle: retry".to_owned()), "{settles:?}");
    assert!(
        settles.contains(&"settle: dead_letter".to_owned()),
        "{settles:?}"
    );
    // A dead letter is pushed as any message: a `send` span in the failed
    // job's trace, continued by the dead-letter topic's consumer.
    let dead_sends = named(format!("send {dead_topic}"));
    let dead_processes = named(format!("process {dead_topic}"));
    assert_eq!(dead_sends.len(), 2, "{:#?}", span_names(&spans));
    for failed in sends
        .iter()
        .filter(|s| s.span_context.trace_id() != root_trace)
    {
        let trace = failed.span_context.trace_id();
        let dead_send = dead_sends
            .iter()
            .find(|s| s.span_context.trace_id() == trace)
            .expect("the dead letter's send span is in the failed job's trace");
        assert!(
            dead_processes
                .iter()
                .any(|p| p.parent_span_id == dead_send.span_context.span_id()),
            "the dead-letter consumer continues the failed job's trace"
        );
    }
    let permanent: Vec<_> = processes
        .iter()
        .filter(|s| attr_str(s, names::ERROR_TYPE) == names::ERROR_PERMANENT)
        .collect();
    assert_eq!(permanent.len(), 1);

    // Metrics.
    let observed = observed.metrics();
    let topic_labels = [
        (names::SYSTEM, backend),
        (names::DESTINATION, topic.as_str()),
    ];
    assert_eq!(observed.counter(names::SENT_MESSAGES, &topic_labels), 3);
    assert_eq!(observed.counter(names::CONSUMED_MESSAGES, &topic_labels), 4);
    let handler_error = [
        (names::DESTINATION, topic.as_str()),
        (names::ERROR_TYPE, names::ERROR_HANDLER),
    ];
    let permanent_error = [
        (names::DESTINATION, topic.as_str()),
        (names::ERROR_TYPE, names::ERROR_PERMANENT),
    ];
    assert_eq!(observed.counter(names::RETRIED_MESSAGES, &handler_error), 1);
    assert_eq!(
        observed.counter(names::DEAD_LETTERED_MESSAGES, &handler_error),
        1
    );
    assert_eq!(
        observed.counter(names::DEAD_LETTERED_MESSAGES, &permanent_error),
        1
    );
    assert_eq!(
        observed.histogram_len(names::PROCESS_DURATION, &topic_labels),
        1
    );
    assert_eq!(
        observed.histogram_len(names::PROCESS_DURATION, &handler_error),
        2
    );
    assert_eq!(
        observed.histogram_len(names::OPERATION_DURATION, &topic_labels),
        3
    );
    match observed.metric(MetricKind::Gauge, names::IN_FLIGHT_HANDLERS, &topic_labels) {
        Some(DebugValue::Gauge(v)) => assert_eq!(v.into_inner(), 0.0, "every handler ended"),
        other => panic!("in-flight gauge: {other:?}"),
    }
    // The dead letters themselves were pushed to the dead-letter topic and consumed there.
    let dead_labels = [(names::DESTINATION, dead_topic.as_str())];
    assert_eq!(observed.counter(names::CONSUMED_MESSAGES, &dead_labels), 2);
    assert_eq!(observed.counter(names::SENT_MESSAGES, &dead_labels), 2);
}

#[tokio::test(flavor = "current_thread")]
async fn disque_embedded_traces_and_metrics() {
    let server = EmbeddedDisque::start(ServerConfig::default().with_port(0))
        .await
        .expect("embedded server");
    check(&format!("disque://{}", server.addr()), "disque").await;
}

#[tokio::test(flavor = "current_thread")]
async fn redis_traces_and_metrics() {
    check(&redis_url(), "redis").await;
}

#[tokio::test(flavor = "current_thread")]
async fn rabbitmq_traces_and_metrics() {
    check(&amqp_url(), "rabbitmq").await;
}

/// A batch counts every job it stored: one sent message and one send
/// duration each, like single pushes; in an application span every job
/// carries the trace context of the batch's `send` span, except one that
/// came with its own.
#[tokio::test(flavor = "current_thread")]
async fn a_batch_counts_every_job() {
    let server = EmbeddedDisque::start(ServerConfig::default().with_port(0))
        .await
        .expect("embedded server");
    let (observed, _tracing, recorder) = observe();
    let _metrics = metrics::set_default_local_recorder(recorder);
    let url = format!("disque://{}", server.addr());
    let Some(client) = connect(&url, "disque").await else {
        return;
    };
    let topic = unique("batch");
    let own_parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let jobs = (0..7)
        .map(|n| {
            let options = ezmq::PushOptions::new();
            let options = if n == 0 {
                options.with_header(ezmq::telemetry::TRACEPARENT_HEADER, own_parent)
            } else {
                options
            };
            (n.to_string().into(), options)
        })
        .collect();
    let root = tracing::info_span!("signup");
    let root_trace = {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        root.context().span().span_context().trace_id()
    };
    let sent = {
        use tracing::Instrument;
        client.push_batch(&topic, jobs).instrument(root).await
    };
    for stored in sent.expect("batch") {
        stored.expect("job stored");
    }
    let mut parents: Vec<String> = client
        .peek(&topic, 10)
        .await
        .expect("peek")
        .iter()
        .map(|job| {
            job.headers()
                .get(ezmq::telemetry::TRACEPARENT_HEADER)
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    parents.sort();
    parents.dedup();
    assert_eq!(parents.len(), 2, "{parents:?}");
    assert!(parents.iter().any(|p| p == own_parent), "{parents:?}");
    assert!(
        parents.iter().any(|p| p.contains(&root_trace.to_string())),
        "{parents:?} in trace {root_trace}"
    );
    let labels = [
        (names::SYSTEM, "disque"),
        (names::DESTINATION, topic.as_str()),
    ];
    let metrics = observed.metrics();
    assert_eq!(metrics.counter(names::SENT_MESSAGES, &labels), 7);
    assert_eq!(metrics.histogram_len(names::OPERATION_DURATION, &labels), 7);
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    server.shutdown().await;
}
