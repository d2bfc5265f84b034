//! `ezmq` end to end against RabbitMQ (`EZMQ_TEST_AMQP_URL`, skipped when
//! nothing answers unless `EZMQ_REQUIRE_BROKERS` names rabbitmq). RabbitMQ
//! has no peek: `peek` and listing dead letters exit with code 4, requeue
//! and purge work.

mod support;

use support::cases::{self, Caps};

const CAPS: Caps = Caps {
    peek: false,
    in_flight: false,
    job_store: false,
};

#[tokio::test]
async fn push_stats_peek() {
    let Some(url) = support::rabbitmq().await else {
        return;
    };
    cases::push_stats_peek(&url, CAPS).await;
}

#[tokio::test]
async fn push_delay() {
    let Some(url) = support::rabbitmq().await else {
        return;
    };
    cases::push_delay(&url).await;
}

#[tokio::test]
async fn dead_letter_round_trip() {
    let Some(url) = support::rabbitmq().await else {
        return;
    };
    cases::dead_letter_round_trip(&url, CAPS).await;
}

#[tokio::test]
async fn purge() {
    let Some(url) = support::rabbitmq().await else {
        return;
    };
    cases::purge(&url).await;
}

#[tokio::test]
async fn groups() {
    let Some(url) = support::rabbitmq().await else {
        return;
    };
    cases::groups(&url).await;
}

#[tokio::test]
async fn cron_list() {
    let Some(url) = support::rabbitmq().await else {
        return;
    };
    cases::cron_list(&url, false).await;
}

/// A failed connection is one error with its causes: not also lapin's own
/// ERROR lines, and no "retry" where nothing retries.
#[tokio::test]
async fn a_failed_connection_is_said_once() {
    let Some(url) = support::rabbitmq().await else {
        return;
    };
    let authority = url
        .rsplit_once('@')
        .map_or(url.as_str(), |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let bad = format!("amqp://guest:guest@{authority}/ezmq-no-such-vhost");
    let out = support::ezmq_env(&bad, &["stats", "t"], &[("RUST_LOG", "warn")])
        .await
        .expect_code(3);
    assert!(
        out.stderr.contains("virtual host \"ezmq-no-such-vhost\""),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("could not connect").count(),
        1,
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("lapin"), "{}", out.stderr);
    assert!(!out.stderr.contains("retry"), "{}", out.stderr);
}

#[tokio::test]
async fn scheduled_cancel_promote() {
    let Some(url) = support::rabbitmq().await else {
        return;
    };
    cases::scheduled_cancel_promote(&url, CAPS).await;
}

#[tokio::test]
async fn pause_resume() {
    let Some(url) = support::rabbitmq().await else {
        return;
    };
    cases::pause_resume(&url).await;
}

#[tokio::test]
async fn stats_show_limits() {
    let Some(url) = support::rabbitmq().await else {
        return;
    };
    support::flow_cases::stats_show_limits(&url).await;
}

#[tokio::test]
async fn live_view() {
    let Some(url) = support::rabbitmq().await else {
        return;
    };
    cases::live_view(&url, false).await;
}
