//! Broker restart: reconnect, redeclare, nothing confirmed lost. Runs only
//! with `EZMQ_TEST_AMQP_RESTART_CMD` (a shell command restarting the broker,
//! e.g. `rabbitmqctl stop_app && rabbitmqctl start_app`).

mod support;

use std::time::{Duration, Instant};

use ezmq_core::spi::{Backend, Source};
use ezmq_core::{PushOptions, Topic};
use ezmq_rabbitmq::RabbitBackend;

#[tokio::test]
async fn survives_a_broker_restart() {
    let Ok(cmd) = std::env::var("EZMQ_TEST_AMQP_RESTART_CMD") else {
        println!("skipped: EZMQ_TEST_AMQP_RESTART_CMD is not set (restart test)");
        return;
    };
    let Some(config) = support::config().await else {
        return;
    };
    let backend = RabbitBackend::connect(config).await.unwrap();
    let topic = support::topic("restart");
    let t = Topic::new(&topic).unwrap();
    let source = Source::Topic(t.clone());
    for i in 0..10 {
        backend
            .publish(&t, format!("{i}").into(), &PushOptions::new())
            .await
            .unwrap();
    }
    // A consumer exists before the restart (it must be recreated after).
    let first = backend
        .receive(&source, 1, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&cmd)
        .status()
        .await
        .unwrap();
    assert!(status.success(), "restart command failed");
    // The unacked delivery comes back; pushes work again once reconnected.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match backend
            .publish(&t, "after".into(), &PushOptions::new())
            .await
        {
            Ok(_) => break,
            Err(err) if Instant::now() < deadline => {
                assert!(err.is_retryable(), "{err}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(err) => panic!("no reconnect: {err}"),
        }
    }
    let mut got = Vec::new();
    while got.len() < 11 && Instant::now() < deadline {
        match backend.receive(&source, 20, Duration::from_secs(1)).await {
            Ok(batch) => {
                for d in batch {
                    got.push(String::from_utf8(d.job.body().to_vec()).unwrap());
                    d.handle.ack().await.unwrap();
                }
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    got.sort();
    let mut want: Vec<String> = (0..10).map(|i| i.to_string()).collect();
    want.push("after".into());
    want.sort();
    assert_eq!(got, want);
    backend.close().await.unwrap();
    support::cleanup(&[topic], &[]).await;
}
