//! A hung server (a relay in front of the shared one that stops passing
//! bytes: the connection stays open and nothing is answered): calls fail
//! within their timeout, and a client with a running listener shuts down.

use std::time::Duration;

use ezmq_core::{ConsumeOptions, Job, MqClient, MqClientExt};
use ezmq_nats::NatsConfig;
use ezmq_test_support::{nats_url, skip_or_require, StallingProxy};

/// Generous: the calls give up after about 1 s.
const BOUND: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread")]
async fn calls_to_a_hung_server_fail_in_time_and_shutdown_completes() {
    let url = nats_url();
    if tokio::net::TcpStream::connect(url.trim_start_matches("nats://"))
        .await
        .is_err()
    {
        skip_or_require("nats", &url, &"no answer");
        return;
    }
    let proxy = StallingProxy::in_front_of(&url).await;
    let client = ezmq_nats::connect(
        NatsConfig::new(proxy.route(&url))
            .with_prefix("ezmq_test")
            .with_command_timeout(Duration::from_secs(1)),
    )
    .await
    .expect("a client through the relay");
    let topic = format!("hung.{}", uuid::Uuid::new_v4().simple());
    client
        .push(&topic, "before".into())
        .await
        .expect("a push before the stall");
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new().with_concurrency(4),
            |_job: Job| async move { Ok::<(), std::convert::Infallible>(()) },
        )
        .await
        .expect("listener");

    proxy.stall();
    let err = tokio::time::timeout(BOUND, client.push(&topic, "during".into()))
        .await
        .expect("a push to a hung server was held past 15 s")
        .expect_err("a hung server confirms nothing");
    // Sent (into the client's buffer, maybe onto the wire), never
    // confirmed: the server may have stored it.
    assert!(err.is_outcome_unknown(), "{err:?}");
    let err = tokio::time::timeout(BOUND, client.queue_len(&topic))
        .await
        .expect("queue_len on a hung server was held past 15 s")
        .expect_err("a hung server answers nothing");
    assert!(err.is_retryable(), "{err:?}");
    tokio::time::timeout(BOUND, client.shutdown(Duration::from_secs(2)))
        .await
        .expect("shutting down a client of a hung server was held past 15 s")
        .expect("shutdown");
    proxy.resume();
}
