//! `ezmq` end to end against RabbitMQ (`EZMQ_TEST_AMQP_URL`, skipped when
//! nothing answers unless `EZMQ_REQUIRE_BROKERS` names rabbitmq). RabbitMQ
//! has no peek: `peek` and listing dead letters exit with code 4, requeue
//! and purge work.

mod support;

use support::cases::{self, Caps};

const CAPS: Caps = Caps {
    peek: false,
    in_flight: false,
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
    cases::groups(&url, false).await;
}

#[tokio::test]
async fn cron_list() {
    let Some(url) = support::rabbitmq().await else {
        return;
    };
    cases::cron_list(&url, false).await;
}
