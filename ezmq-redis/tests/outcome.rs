//! Push outcomes: a push sent to a Redis that never answered has an
//! unknown outcome (not a retryable error), and pushing it again with the
//! same message id stores it once (`Capability::IdempotentPush`).

mod support;

use std::time::Duration;

use ezmq_core::{Client, ConsumeOptions, MqClient, PushOptions};
use tokio::sync::mpsc;
use tokio::time::timeout;

const LONG: Duration = Duration::from_secs(15);

#[tokio::test]
async fn a_push_to_a_frozen_redis_is_outcome_unknown_and_its_retry_by_message_id_stores_one() {
    let Some(config) = support::config().await else {
        return;
    };
    // The real Redis behind a relay that can freeze: the push is sent and
    // nothing is answered, as with a stopped server process.
    let (proxy, client) = support::behind_stalling_proxy(config).await;
    let topic = support::topic("outcome");
    let mut rx = support::forwarded_bodies(&client, &topic, ConsumeOptions::new()).await;
    client.push(&topic, "before".into()).await.unwrap();
    assert_eq!(timeout(LONG, rx.recv()).await.unwrap().unwrap(), "before");

    let order = || PushOptions::new().with_message_id("order-7");
    proxy.stall();
    let err = timeout(LONG, client.push_with(&topic, "order-7".into(), order()))
        .await
        .expect("a push to a frozen Redis was held past 15 s")
        .unwrap_err();
    assert!(err.is_outcome_unknown(), "{err:#}");
    assert!(!err.is_retryable(), "{err:#}");
    let text = err.to_string();
    assert!(text.contains("may or may not have been stored"), "{text}");
    assert!(text.contains("XADD") || text.contains("script"), "{text}");
    proxy.resume();

    // The frozen push is stored once Redis answers; the retry with the same
    // id stores nothing and returns the same job id.
    let again = timeout(LONG, client.push_with(&topic, "order-7".into(), order()))
        .await
        .expect("the retry was held past 15 s")
        .unwrap();
    assert_eq!(again.as_str(), "order-7");
    let seen = bodies_until_marker(&client, &topic, &mut rx).await;
    assert_eq!(
        seen.iter().filter(|b| *b == "order-7").count(),
        1,
        "one delivery of the job pushed twice: {seen:?}"
    );
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    drop(proxy);
    delete_topic_keys(&topic, &["order-7"]).await;
}

#[tokio::test]
async fn delayed_pushes_are_deduplicated_by_message_id_within_the_window() {
    let Some(config) = support::config().await else {
        return;
    };
    let client = support::client(&config.with_message_id_window(Duration::from_secs(60))).await;
    let topic = support::topic("dedup");
    let mut rx = support::forwarded_bodies(&client, &topic, ConsumeOptions::new()).await;
    let late = || {
        PushOptions::new()
            .with_message_id("late-1")
            .with_delay(Duration::from_millis(200))
    };
    let first = client
        .push_with(&topic, "late-1".into(), late())
        .await
        .unwrap();
    let second = client
        .push_with(&topic, "late-1".into(), late())
        .await
        .unwrap();
    assert_eq!(first, second, "the duplicate returns the first push's id");
    assert_eq!(first.as_str(), "late-1");
    // Pushes without an id are never deduplicated.
    client.push(&topic, "plain".into()).await.unwrap();
    client.push(&topic, "plain".into()).await.unwrap();
    let seen = bodies_until(&mut rx, |seen| seen.iter().any(|b| b == "late-1")).await;
    let seen = seen
        .into_iter()
        .chain(bodies_until_marker(&client, &topic, &mut rx).await)
        .collect::<Vec<_>>();
    assert_eq!(
        seen.iter().filter(|b| *b == "late-1").count(),
        1,
        "{seen:?}"
    );
    assert_eq!(seen.iter().filter(|b| *b == "plain").count(), 2, "{seen:?}");

    // The id is remembered for the window, not forever.
    let key = format!("ezmq:{{{topic}}}:msgid:late-1");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&key)
        .query_async(&mut raw().await)
        .await
        .unwrap();
    assert!(ttl > 0 && ttl <= 60_000, "{key} expires in {ttl} ms");
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    delete_topic_keys(&topic, &["late-1"]).await;
}

#[tokio::test]
async fn a_push_redis_refuses_keeps_its_error() {
    let Some(config) = support::config().await else {
        return;
    };
    let client = support::client(&config).await;
    let topic = support::topic("refused");
    // Not a stream: Redis answers `WRONGTYPE` and stores nothing.
    let stream = format!("ezmq:{{{topic}}}:s");
    let _: () = redis::cmd("SET")
        .arg(&stream)
        .arg("not a stream")
        .query_async(&mut raw().await)
        .await
        .unwrap();
    let err = client.push(&topic, "x".into()).await.unwrap_err();
    assert!(!err.is_outcome_unknown(), "{err:#}");
    assert!(!err.is_retryable(), "{err:#}");
    assert!(
        err.to_string().contains("WRONGTYPE"),
        "the cause is shown: {err}"
    );
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    delete_topic_keys(&topic, &[]).await;
}

/// Bodies received until `done` holds (each wait up to 15 s).
async fn bodies_until(
    rx: &mut mpsc::UnboundedReceiver<String>,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let mut seen = Vec::new();
    while !done(&seen) {
        match timeout(LONG, rx.recv()).await {
            Ok(Some(body)) => seen.push(body),
            _ => panic!("nothing more arrived within {LONG:?}; seen {seen:?}"),
        }
    }
    seen
}

/// Pushes a marker and returns the bodies received up to it (the queue
/// is a stream: everything pushed before the marker comes before it).
async fn bodies_until_marker(
    client: &Client,
    topic: &str,
    rx: &mut mpsc::UnboundedReceiver<String>,
) -> Vec<String> {
    client.push(topic, "marker".into()).await.unwrap();
    let mut seen = bodies_until(rx, |seen| seen.iter().any(|b| b == "marker")).await;
    // Anything delivered just after the marker (a late duplicate) too.
    while let Ok(Some(body)) = timeout(Duration::from_millis(300), rx.recv()).await {
        seen.push(body);
    }
    seen
}

/// A plain connection to the shared Redis.
async fn raw() -> redis::aio::MultiplexedConnection {
    redis::Client::open(support::redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Deletes the keys a test topic left on the shared Redis.
async fn delete_topic_keys(topic: &str, message_ids: &[&str]) {
    let mut cmd = redis::cmd("DEL");
    cmd.arg(format!("ezmq:{{{topic}}}:s"))
        .arg(format!("ezmq:{{{topic}}}:d"));
    for id in message_ids {
        cmd.arg(format!("ezmq:{{{topic}}}:msgid:{id}"));
    }
    let _: i64 = cmd.query_async(&mut raw().await).await.unwrap();
}
