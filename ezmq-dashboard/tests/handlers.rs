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

/// The overview's rates: 20 jobs waiting at the first look, 20 more
/// pushed, all 40 done by a listener; once the listener's record tells it
/// and 10 seconds are sampled, the topic's row shows them done at twice
/// the rate they came in (40 done; 20 came in, the backlog having gone
/// from 20 to none), none failed, and a line of its backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rates_show_what_listeners_did() {
    let broker = TestBroker::start().await;
    let client = support::disque(&broker).await;
    let topic = unique_topic("rates");
    for n in 0..20 {
        client
            .push(&topic, format!("early {n}").into())
            .await
            .expect("push");
    }
    let app = router(client.clone(), DashboardOptions::new());
    let first = get(&app, "/").await;
    assert!(first.text.contains(&topic), "{}", first.text);

    let listener = client
        .add_consume_listener(&topic, |_job: ezmq::Job| async {
            Ok::<(), std::convert::Infallible>(())
        })
        .await
        .expect("listener");
    for n in 0..20 {
        client
            .push(&topic, format!("late {n}").into())
            .await
            .expect("push");
    }
    let all_done = eventually(Duration::from_secs(30), || async {
        listener.succeeded() == 40
    })
    .await;
    assert!(all_done, "40 jobs done, not {}", listener.succeeded());
    let told = eventually(Duration::from_secs(30), || async {
        let participants = client.admin().participants().await.unwrap_or_default();
        participants
            .iter()
            .flat_map(|p| &p.listeners)
            .any(|l| l.topic == topic && l.succeeded == 40)
    })
    .await;
    assert!(told, "the listener's presence record says 40 done");

    let shown = eventually(Duration::from_secs(30), || async {
        let row = support::row(&get(&app, "/").await.text, &topic);
        row.get(6).is_some_and(|done| done != "-")
    })
    .await;
    let row = support::row(&get(&app, "/").await.text, &topic);
    assert!(shown, "rates on the overview: {row:?}");
    let rate = |cell: &str| -> f64 {
        cell.trim_end_matches("/s")
            .parse()
            .unwrap_or_else(|_| panic!("a rate, not {cell:?}"))
    };
    let (jobs_in, done, failed) = (rate(&row[5]), rate(&row[6]), rate(&row[7]));
    assert!(done > 0.0, "{row:?}");
    assert!(
        (done - 2.0 * jobs_in).abs() <= 0.15,
        "done at twice the rate jobs came in: {row:?}"
    );
    assert_eq!(failed, 0.0, "{row:?}");
    assert!(row[8].contains("<svg"), "the backlog's line: {row:?}");
    listener.stop(Duration::from_secs(5)).await;
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

/// `/groups`: a broadcast topic with two groups, one of two members, is
/// listed with its live members and the processes running them; a member
/// that stops leaves the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_page_shows_live_members() {
    let broker = TestBroker::start().await;
    let client = support::disque(&broker).await;
    let topic = unique_topic("bc");
    let handler = || ezmq::handler_fn(|_job: ezmq::Job| async { Ok::<(), std::io::Error>(()) });
    let billing = client
        .add_broadcast_listener(&topic, "billing", std::sync::Arc::new(handler()))
        .await
        .expect("join");
    let mut audit = vec![
        client
            .add_broadcast_listener(&topic, "audit", std::sync::Arc::new(handler()))
            .await
            .expect("join"),
        client
            .add_broadcast_listener(&topic, "audit", std::sync::Arc::new(handler()))
            .await
            .expect("join"),
    ];
    let app = router(client.clone(), DashboardOptions::new());
    let row = |group: &str, members: u64| {
        format!(
            r#"<a href="/groups?topic={topic}">{topic}</a></td><td>{group}</td><td>{members}</td>"#
        )
    };
    let listed = eventually(Duration::from_secs(15), || async {
        let page = get(&app, "/groups").await.text;
        page.contains(&row("audit", 2)) && page.contains(&row("billing", 1))
    })
    .await;
    let page = get(&app, "/groups").await.text;
    assert!(listed, "audit with 2 members, billing with 1:\n{page}");
    assert!(page.contains(&ezmq::presence::process_name()), "{page}");
    if let Some(member) = audit.pop() {
        member.stop(Duration::from_secs(5)).await;
    }
    let left = eventually(Duration::from_secs(15), || async {
        get(&app, &format!("/groups?topic={topic}"))
            .await
            .text
            .contains(&row("audit", 1))
    })
    .await;
    assert!(
        left,
        "audit with one member:\n{}",
        get(&app, "/groups").await.text
    );
    billing.stop(Duration::from_secs(5)).await;
    for member in audit {
        member.stop(Duration::from_secs(5)).await;
    }
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

/// The health page: the server's name, its nodes up, its facts; never
/// the broker's URL or address (`addrs`: its `host:port`s).
async fn health_page(client: Client, url: &str, addrs: &[String]) {
    let app = router(client.clone(), DashboardOptions::new());
    let page = get(&app, "/health").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let health = client.admin().health().await.expect("health");
    assert!(
        page.text
            .contains(&format!("<strong>{}</strong>", health.server)),
        "the server's name:\n{}",
        page.text
    );
    assert!(
        page.text.contains("<td>up</td>"),
        "a node up:\n{}",
        page.text
    );
    assert!(
        page.text.contains("answered in"),
        "the facts:\n{}",
        page.text
    );
    assert!(
        page.text
            .contains(r#"<a href="/health" class="on">Health</a>"#),
        "the header's link:\n{}",
        page.text
    );
    for secret in addrs.iter().map(String::as_str).chain([url, "127.0.0.1"]) {
        assert!(
            !page.text.contains(secret),
            "{secret} on the health page:\n{}",
            page.text
        );
    }
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_page_on_disque() {
    let broker = TestBroker::start().await;
    let url = format!("disque://{}", broker.addrs().join(","));
    health_page(support::disque(&broker).await, &url, &broker.addrs()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_page_on_redis() {
    let url = ezmq_test_support::redis_url();
    if let Some(client) = support::connect("redis", &url).await {
        let addr = ezmq::spi::protocol_probe::host_port(&url, 6379).unwrap_or_default();
        health_page(client, &url, &[addr]).await;
    }
}
