//! Observability of cron ticks, request-reply calls and broadcasts on
//! every backend: their spans and metrics (the job lifecycle's are in
//! `observability.rs`).
//!
//! Each test runs on a current-thread runtime with a thread-local tracing
//! subscriber and metrics recorder, so tests in this binary do not see
//! each other's spans and metrics.

use std::time::Duration;

use ezmq::prelude::*;
use ezmq::telemetry::names;
use ezmq::Job;
use ezmq_disque_server::{EmbeddedDisque, ServerConfig};
use opentelemetry::trace::SpanKind;
use opentelemetry_sdk::trace::SpanData;
use tokio::sync::mpsc;

mod observe;
mod support;
use observe::*;
use support::connect;

/// A cron tick, a request-reply call and a broadcast against `url`.
async fn check_cron_and_request(url: &str, backend: &str) {
    let (observed, _tracing, recorder) = observe();
    let _metrics = metrics::set_default_local_recorder(recorder);
    let Some(client) = connect(url, backend).await else {
        return;
    };
    let cron = unique("tick");
    let (tick_tx, mut ticks) = mpsc::unbounded_channel::<()>();
    client
        .add_crontab(&cron, "* * * * * *", move |_tick| {
            let tick_tx = tick_tx.clone();
            async move {
                let _ = tick_tx.send(());
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .expect("crontab");
    let topic = unique("price");
    client
        .add_reply_listener(&topic, |request: ezmq::request_reply::Request| async move {
            Ok::<_, std::io::Error>(request.body().clone())
        })
        .await
        .expect("reply listener");
    let reply = client
        .request(&topic, "42".into(), Duration::from_secs(10))
        .await
        .expect("reply");
    assert_eq!(&reply.body()[..], b"42");

    // A broadcast: the group's consumer joins the producer's trace.
    let prices = unique("prices");
    let (bc_tx, mut broadcasts) = mpsc::unbounded_channel::<()>();
    client
        .add_broadcast_consume_listener(&prices, "search", move |_job: Job| {
            let bc_tx = bc_tx.clone();
            async move {
                let _ = bc_tx.send(());
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .expect("broadcast listener");
    let announce = tracing::info_span!("reprice");
    {
        use tracing::Instrument;
        client
            .push_broadcast(&prices, "A1".into())
            .instrument(announce.clone())
            .await
            .expect("broadcast");
    }
    drop(announce);
    recv(&mut broadcasts, "the broadcast").await;
    recv(&mut ticks, "a cron tick").await;
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");

    let spans = observed.spans();
    let _ = observed.provider.shutdown();
    let one = |name: String| -> &SpanData {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {:#?}", span_names(&spans)))
    };
    let request = one(format!("request {topic}"));
    assert_eq!(request.span_kind, SpanKind::Client);
    let send = one(format!("send {topic}"));
    let process = one(format!("process {topic}"));
    assert_eq!(send.parent_span_id, request.span_context.span_id());
    assert_eq!(process.parent_span_id, send.span_context.span_id());
    assert_eq!(
        process.span_context.trace_id(),
        request.span_context.trace_id()
    );
    let announce = one("reprice".to_owned());
    let broadcast_send = one(format!("send {prices}"));
    assert_eq!(broadcast_send.span_kind, SpanKind::Producer);
    assert_eq!(
        broadcast_send.span_context.trace_id(),
        announce.span_context.trace_id(),
        "the broadcast's send span is in the application's trace"
    );
    let broadcast_process = spans
        .iter()
        .find(|s| s.name.starts_with("process ") && s.name.contains(prices.as_str()))
        .unwrap_or_else(|| panic!("no process span for {prices}: {:#?}", span_names(&spans)));
    assert_eq!(
        broadcast_process.parent_span_id,
        broadcast_send.span_context.span_id(),
        "the broadcast's consumer is a child of the producer's send span"
    );
    let tick = one(format!("cron {cron}"));
    assert_eq!(attr_str(tick, names::SYSTEM), backend);

    let metrics = observed.metrics();
    let topic_labels = [
        (names::SYSTEM, backend),
        (names::DESTINATION, topic.as_str()),
    ];
    assert_eq!(
        metrics.histogram_len(names::REQUEST_DURATION, &topic_labels),
        1
    );
    let run = [
        (names::CRON_NAME, cron.as_str()),
        (names::CRON_OUTCOME, "run"),
    ];
    assert!(metrics.counter(names::CRON_TICKS, &run) >= 1, "a tick ran");
}

#[tokio::test(flavor = "current_thread")]
async fn disque_embedded_cron_and_request_spans() {
    let server = EmbeddedDisque::start(ServerConfig::default().with_port(0))
        .await
        .expect("embedded server");
    check_cron_and_request(&format!("disque://{}", server.addr()), "disque").await;
}

#[tokio::test(flavor = "current_thread")]
async fn redis_cron_and_request_spans() {
    check_cron_and_request(&redis_url(), "redis").await;
}

#[tokio::test(flavor = "current_thread")]
async fn rabbitmq_cron_and_request_spans() {
    check_cron_and_request(&amqp_url(), "rabbitmq").await;
}
