//! `ezmq` end to end against Redis (`EZMQ_TEST_REDIS_URL`, skipped when
//! nothing answers unless `EZMQ_REQUIRE_BROKERS` names redis).

mod support;

use support::cases::{self, Caps};

const CAPS: Caps = Caps {
    peek: true,
    in_flight: true,
    job_store: true,
};

#[tokio::test]
async fn push_stats_peek() {
    let Some(url) = support::redis().await else {
        return;
    };
    cases::push_stats_peek(&url, CAPS).await;
}

#[tokio::test]
async fn push_delay() {
    let Some(url) = support::redis().await else {
        return;
    };
    cases::push_delay(&url).await;
}

#[tokio::test]
async fn dead_letter_round_trip() {
    let Some(url) = support::redis().await else {
        return;
    };
    cases::dead_letter_round_trip(&url, CAPS).await;
}

#[tokio::test]
async fn purge() {
    let Some(url) = support::redis().await else {
        return;
    };
    cases::purge(&url).await;
}

#[tokio::test]
async fn groups() {
    let Some(url) = support::redis().await else {
        return;
    };
    cases::groups(&url).await;
}

#[tokio::test]
async fn cron_list() {
    let Some(url) = support::redis().await else {
        return;
    };
    cases::cron_list(&url, true).await;
}

#[tokio::test]
async fn scheduled_cancel_promote() {
    let Some(url) = support::redis().await else {
        return;
    };
    cases::scheduled_cancel_promote(&url, CAPS).await;
}

#[tokio::test]
async fn pause_resume() {
    let Some(url) = support::redis().await else {
        return;
    };
    cases::pause_resume(&url).await;
}

#[tokio::test]
async fn stats_show_limits() {
    let Some(url) = support::redis().await else {
        return;
    };
    support::flow_cases::stats_show_limits(&url).await;
}

#[tokio::test]
async fn live_view() {
    let Some(url) = support::redis().await else {
        return;
    };
    cases::live_view(&url, true).await;
}
