//! Listeners resume by themselves after the server restarts (on a private
//! `redis-server`, so the shared one is not disturbed), and within about a
//! second of it accepting connections again.

mod support;

use std::time::Duration;

use ezmq_core::{ConsumeOptions, MqClient};
use tokio::time::{timeout, Instant};

#[tokio::test]
async fn listeners_resume_after_a_server_restart() {
    let Some(mut server) = support::private_redis(&[]).await else {
        return;
    };
    let client = support::client(&server.config()).await;
    let topic = support::topic("restart");
    let mut rx = support::forwarded_bodies(&client, &topic, ConsumeOptions::new()).await;
    client.push(&topic, "before".into()).await.unwrap();
    assert_eq!(
        timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap(),
        "before"
    );

    server.kill();
    // The first push may be sent before the client saw the connection
    // close: its outcome is unknown, or it failed before it was sent.
    let err = client.push(&topic, "while down".into()).await.unwrap_err();
    assert!(err.is_retryable() || err.is_outcome_unknown(), "{err}");
    // Now the connection is known dead: pushes are never sent (connection
    // refused), so they are retryable, not of unknown outcome.
    let err = client.push(&topic, "while down".into()).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(!err.is_outcome_unknown(), "a push never sent: {err}");
    server.restart().await;

    // The stream and its group are gone (no persistence): the listener
    // recreates the group and gets what is pushed now.
    push_until_accepted(&client, &topic, "after").await;
    assert_eq!(
        timeout(Duration::from_secs(20), rx.recv())
            .await
            .unwrap()
            .unwrap(),
        "after"
    );
    client.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// The worst case of a restart for a listener: Redis comes back just
/// after the listener's fetch failed, with its fetch-error backoff at its
/// longest. From the moment the port accepts again to the first delivery
/// takes under 2 s (the goal is 1 s: the default backoff is capped at 1 s
/// and a dead connection is made again on first use, with no reconnect
/// delay of its own): measured 0.99 s. With the old 5 s cap: 4.99 s.
#[tokio::test]
async fn listener_resumes_within_a_second_of_the_server_accepting_again() {
    let Some(mut server) = support::private_redis(&[]).await else {
        return;
    };
    let client = support::client(&server.config()).await;
    let topic = support::topic("resume");
    // No queue-depth sampling: the fetch loop is the only one connecting.
    let options = ConsumeOptions::new().with_queue_depth_every(None);
    let mut rx = support::forwarded_bodies(&client, &topic, options).await;
    client.push(&topic, "before".into()).await.unwrap();
    let first = timeout(Duration::from_secs(10), rx.recv()).await.unwrap();
    assert_eq!(first.as_deref(), Some("before"));

    server.kill();
    // Long enough for the backoff to reach its cap (and the old 5 s cap's
    // 3.2 s step); then wait for the listener's next attempt to fail on a
    // port that closes every connection, and start Redis right after it.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let refusing = tokio::net::TcpListener::bind(("127.0.0.1", server.port))
        .await
        .expect("bind the stopped server's port");
    let (attempt, _) = timeout(Duration::from_secs(10), refusing.accept())
        .await
        .expect("the listener tried to reconnect within 10 s")
        .unwrap();
    drop(attempt);
    drop(refusing);
    let accepting = server.start_again().await;
    push_until_accepted(&client, &topic, "after").await;
    let got = timeout(Duration::from_secs(20), rx.recv()).await.unwrap();
    let resumed = accepting.elapsed();
    assert_eq!(got.as_deref(), Some("after"));
    println!("redis restart: first delivery {resumed:?} after the port accepted again");
    assert!(
        resumed < Duration::from_secs(2),
        "deliveries resumed {resumed:?} after Redis was back (goal 1 s)"
    );
    client.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Pushes `body`, retrying every 10 ms for up to 10 s while Redis is not
/// back yet.
async fn push_until_accepted(client: &ezmq_core::Client, topic: &str, body: &str) {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        match client.push(topic, body.to_owned().into()).await {
            Ok(_) => return,
            Err(err) if Instant::now() < end => {
                tracing::debug!(cause = %err, "push after the restart failed; again");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(err) => panic!("push never succeeded after the restart: {err:#}"),
        }
    }
}
