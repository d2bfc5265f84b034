//! The CLI takes the same URL as the service, settings included: a service
//! that names its keys with `?prefix=` is inspected with that URL (or
//! `EZMQ_PREFIX`), and its jobs are invisible without it.

mod support;

use std::time::Duration;

use ezmq::{MqClient, Topic};
use support::{ezmq, topic};

async fn stats(url: &str, topic: &str) -> serde_json::Value {
    ezmq(url, &["--json", "stats", topic]).await.ok().json()[0].clone()
}

#[tokio::test]
async fn a_prefixed_service_is_inspected_with_its_url() {
    let Some(url) = support::redis().await else {
        return;
    };
    let prefix = format!("app{}", std::process::id());
    let service_url = format!("{url}?prefix={prefix}");
    let service = ezmq::connect_url(&service_url).await.expect("connect");
    let t = topic("prefixed");
    service.push(&t, "one".into()).await.expect("push");
    service.push(&t, "two".into()).await.expect("push");

    let seen = stats(&service_url, &t).await;
    assert_eq!(seen["waiting"], 2, "with the service's URL: {seen}");
    let unprefixed = stats(&url, &t).await;
    assert_eq!(
        unprefixed["waiting"], 0,
        "another prefix's keys: {unprefixed}"
    );

    // The query string's settings are checked like the service's.
    let bad = ezmq(&format!("{url}?prefx=app"), &["stats", &t])
        .await
        .expect_code(2);
    assert!(
        bad.stderr.contains("unknown option `prefx`"),
        "{}",
        bad.stderr
    );

    // Leave nothing on the shared Redis.
    let admin = service.admin();
    let taken = admin
        .take(&Topic::new(&t).expect("topic"), 2, Duration::from_secs(5))
        .await
        .expect("take");
    let handles: Vec<_> = taken.into_iter().map(|d| d.handle).collect();
    admin.ack_all(&handles).await.expect("ack");
    service
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
