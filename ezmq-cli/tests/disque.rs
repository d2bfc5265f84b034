//! `ezmq` end to end against the embedded Disque-compatible server (or the
//! real nodes in `EZMQ_TEST_DISQUE_ADDRS`).

mod support;

use ezmq_test_support::TestBroker;
use support::cases::{self, Caps};
use support::disque_url;

const CAPS: Caps = Caps {
    peek: true,
    in_flight: false,
    job_store: true,
};

#[tokio::test]
async fn push_stats_peek() {
    let broker = TestBroker::start().await;
    cases::push_stats_peek(&disque_url(&broker), CAPS).await;
}

#[tokio::test]
async fn push_delay() {
    let broker = TestBroker::start().await;
    cases::push_delay(&disque_url(&broker)).await;
}

#[tokio::test]
async fn dead_letter_round_trip() {
    let broker = TestBroker::start().await;
    cases::dead_letter_round_trip(&disque_url(&broker), CAPS).await;
}

#[tokio::test]
async fn purge() {
    let broker = TestBroker::start().await;
    cases::purge(&disque_url(&broker)).await;
}

#[tokio::test]
async fn groups() {
    let broker = TestBroker::start().await;
    cases::groups(&disque_url(&broker)).await;
}

#[tokio::test]
async fn cron_list() {
    let broker = TestBroker::start().await;
    cases::cron_list(&disque_url(&broker), true).await;
}

#[tokio::test]
async fn secrets_never_printed() {
    let server = ezmq_disque_server::EmbeddedDisque::start(
        ezmq_disque_server::ServerConfig::default()
            .with_port(0)
            .with_requirepass(Some("cli-S3cret-pw".into())),
    )
    .await
    .expect("embedded server");
    let addr = server.addr();
    cases::secrets_never_printed(
        &format!("disque://:cli-S3cret-pw@{addr}"),
        &format!("disque://:cli-Wr0ng-pw@{addr}"),
        &["cli-S3cret-pw", "cli-Wr0ng-pw"],
    )
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn scheduled_cancel_promote() {
    let broker = TestBroker::start().await;
    cases::scheduled_cancel_promote(&disque_url(&broker), CAPS).await;
}

#[tokio::test]
async fn pause_resume() {
    let broker = TestBroker::start().await;
    cases::pause_resume(&disque_url(&broker)).await;
}

#[tokio::test]
async fn stats_show_limits() {
    let broker = TestBroker::start().await;
    support::flow_cases::stats_show_limits(&disque_url(&broker)).await;
}

#[tokio::test]
async fn live_view() {
    let broker = TestBroker::start().await;
    cases::live_view(&disque_url(&broker), true).await;
}
