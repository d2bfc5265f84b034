//! The dashboard's pages and actions against real brokers: the embedded
//! server (or `EZMQ_TEST_DISQUE_ADDRS`), Redis and RabbitMQ (skipped when
//! they do not answer, unless `EZMQ_REQUIRE_BROKERS` names them).

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use ezmq::prelude::*;
use ezmq::spi::Capability;
use ezmq::Client;
use ezmq_dashboard::{router, DashboardOptions};
use ezmq_test_support::{eventually, unique_topic, TestBroker};
use support::{csrf, fill, get, get_as, post, SCRIPT_BODY};

/// The tour a user takes: the topic on the overview with its count, its
/// page with the jobs (the `<script>` body as text), then a dead letter
/// requeued by its button and the counts changed.
async fn tour(client: Client) {
    let topic = unique_topic("dash");
    fill(&client, &topic).await;
    let app = router(client.clone(), DashboardOptions::new());
    let caps = client.capabilities();
    let peeks = caps.has(Capability::Peek);

    let overview = get(&app, "/").await;
    assert_eq!(overview.status, StatusCode::OK, "{}", overview.text);
    if peeks {
        let row = format!(r#"<a href="/topics/{topic}">{topic}</a></td><td>2</td>"#);
        let listed = eventually(Duration::from_secs(10), || async {
            get(&app, "/").await.text.contains(&row)
        })
        .await;
        assert!(
            listed,
            "{topic} with 2 waiting on the overview:\n{}",
            get(&app, "/").await.text
        );
    } else {
        assert!(
            overview.text.contains("cannot list its queues"),
            "{}",
            overview.text
        );
    }

    let page = get(&app, &format!("/topics/{topic}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(
        !page.text.contains("<script"),
        "a body ran as markup:\n{}",
        page.text
    );
    if peeks {
        assert!(
            page.text
                .contains("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;"),
            "the <script> body shown as text:\n{}",
            page.text
        );
        assert!(
            page.text.contains("card declined"),
            "the dead letter's error:\n{}",
            page.text
        );
    } else {
        assert!(
            page.text.contains("cannot read dead letters"),
            "{}",
            page.text
        );
    }
    let _ = SCRIPT_BODY;

    // Requeue: refused without the page's token, done with it.
    let path = format!("/topics/{topic}/dead-letters/requeue");
    let forged = post(&app, &path, &[("csrf", "forged")]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.text);
    let done = post(&app, &path, &[("csrf", &csrf(&page.text))]).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.text);
    assert_eq!(
        done.location.as_deref(),
        Some(format!("/topics/{topic}?done=requeued%201").as_str())
    );
    let after = get(&app, done.location.as_deref().unwrap_or("/")).await;
    assert!(after.text.contains("requeued 1"), "{}", after.text);
    if caps.has(Capability::QueueStats) {
        let moved = eventually(Duration::from_secs(10), || async {
            client.queue_len(&topic).await.ok() == Some(3)
                && client.queue_len(&format!("{topic}.dead-letter")).await.ok() == Some(0)
        })
        .await;
        assert!(moved, "3 waiting and no dead letter after the requeue");
    }
    support::drain(&client, &topic).await;
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tour_on_disque() {
    let broker = TestBroker::start().await;
    tour(support::disque(&broker).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tour_on_redis() {
    let url = ezmq_test_support::redis_url();
    if let Some(client) = support::connect("redis", &url).await {
        tour(client).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tour_on_rabbitmq() {
    let url = ezmq_test_support::amqp_url();
    if let Some(client) = support::connect("rabbitmq", &url).await {
        tour(client).await;
    }
}

/// Read-only: no button, every action refused; basic auth: 401 without
/// the credential, the page with it; the broker's address never shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_and_basic_auth() {
    let broker = TestBroker::start().await;
    let client = support::disque(&broker).await;
    let topic = unique_topic("dash-ro");
    fill(&client, &topic).await;

    let app = router(client.clone(), DashboardOptions::new().read_only(true));
    let page = get(&app, &format!("/topics/{topic}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        !page.text.contains("<form method=\"post\"") && !page.text.contains("name=\"csrf\""),
        "no action form when read-only:\n{}",
        page.text
    );
    let refused = post(&app, &format!("/topics/{topic}/pause"), &[("csrf", "x")]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(!client
        .admin()
        .is_paused(&ezmq::Topic::new(&topic).unwrap())
        .await
        .unwrap());
    for addr in broker.addrs() {
        assert!(
            !page.text.contains(&addr),
            "the broker's address on the page"
        );
    }

    let app = router(
        client.clone(),
        DashboardOptions::new().with_basic_auth("ops", "s3cret"),
    );
    assert_eq!(get(&app, "/").await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        get_as(&app, "/", "ops:wrong").await.status,
        StatusCode::UNAUTHORIZED
    );
    let page = get_as(&app, "/", "ops:s3cret").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.text.contains("s3cret"));
    support::drain(&client, &topic).await;
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

/// Pause and resume by their buttons; a purge needs the topic's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_and_purge() {
    let broker = TestBroker::start().await;
    let client = support::disque(&broker).await;
    let topic = unique_topic("dash-act");
    fill(&client, &topic).await;
    let app = router(client.clone(), DashboardOptions::new());
    let page = get(&app, &format!("/topics/{topic}")).await;
    let token = csrf(&page.text);
    let t = ezmq::Topic::new(&topic).unwrap();

    let paused = post(&app, &format!("/topics/{topic}/pause"), &[("csrf", &token)]).await;
    assert_eq!(paused.status, StatusCode::SEE_OTHER);
    assert!(client.admin().is_paused(&t).await.unwrap());
    assert!(get(&app, &format!("/topics/{topic}"))
        .await
        .text
        .contains(">Resume</button>"));
    post(
        &app,
        &format!("/topics/{topic}/resume"),
        &[("csrf", &token)],
    )
    .await;
    assert!(!client.admin().is_paused(&t).await.unwrap());

    let purge = format!("/topics/{topic}/dead-letters/purge");
    let unconfirmed = post(&app, &purge, &[("csrf", &token), ("confirm", "other")]).await;
    assert!(unconfirmed
        .location
        .unwrap_or_default()
        .contains("not%20purged"));
    let dead = format!("{topic}.dead-letter");
    assert_eq!(client.queue_len(&dead).await.unwrap(), 1);
    let purged = post(&app, &purge, &[("csrf", &token), ("confirm", &topic)]).await;
    assert!(purged.location.unwrap_or_default().contains("deleted%201"));
    assert_eq!(client.queue_len(&dead).await.unwrap(), 0);
    support::drain(&client, &topic).await;
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
