//! Listeners resume by themselves after the server restarts (on a private
//! `redis-server`, so the shared one is not disturbed).

mod support;

use std::time::Duration;

use ezmq_core::{Job, MqClient, MqClientExt};
use ezmq_redis::RedisConfig;
use tokio::sync::mpsc;
use tokio::time::timeout;

#[tokio::test]
async fn listeners_resume_after_a_server_restart() {
    support::init_tracing();
    if !support::have_redis_server() {
        println!("skipped: no broker at redis-server (not installed)");
        return;
    }
    let mut server = support::RedisProcess::start(support::free_port(), &[]).await;
    let config = RedisConfig::new(server.url())
        .with_connect_timeout(Duration::from_secs(1))
        .with_command_timeout(Duration::from_secs(2));
    let client = support::client(&config).await;
    let topic = support::topic("restart");
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    client
        .add_consume_listener(&topic, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(String::from_utf8_lossy(job.body()).into_owned());
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .unwrap();
    client.push(&topic, "before".into()).await.unwrap();
    assert_eq!(
        timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap(),
        "before"
    );

    server.kill();
    let err = client.push(&topic, "while down".into()).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    server.restart().await;

    // The stream and its group are gone (no persistence): the listener
    // recreates the group and gets what is pushed now.
    let mut pushed = false;
    for _ in 0..100 {
        if client.push(&topic, "after".into()).await.is_ok() {
            pushed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(pushed, "push never succeeded after the restart");
    assert_eq!(
        timeout(Duration::from_secs(20), rx.recv())
            .await
            .unwrap()
            .unwrap(),
        "after"
    );
    client.shutdown(Duration::from_secs(5)).await.unwrap();
}
