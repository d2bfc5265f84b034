//! The broker's health report
//! ([`Admin::health`](ezmq_core::Admin::health)).

use std::time::Duration;

use ezmq_core::MqClient;

use crate::Ctx;

/// `admin().health()` names the server, tells at least one fact (and how
/// long it took), lists at least one node and every node up (the test
/// broker is healthy), and holds neither the broker's URL, nor any of its
/// `host:port`s, nor its password, nor a loopback address.
pub async fn health_reports_the_server(ctx: Ctx) {
    let client = ctx.client();
    let health = client.admin().health().await.expect("health");
    assert!(!health.server.is_empty(), "a server name: {health:?}");
    assert!(!health.facts.is_empty(), "at least one fact: {health:?}");
    assert!(
        health.fact("answered in").is_some(),
        "the round trip among the facts: {health:?}"
    );
    assert!(!health.nodes.is_empty(), "at least one node: {health:?}");
    for node in &health.nodes {
        assert!(!node.name.is_empty(), "every node named: {health:?}");
        assert!(node.up, "node {} up: {health:?}", node.name);
    }
    let shown = format!("{health:?}");
    let url = ctx.broker().url();
    for secret in secrets(&url) {
        assert!(
            !shown.contains(&secret),
            "{secret:?} (of the broker's URL) in the health report: {shown}"
        );
    }
    crate::support::shutdown(client, Duration::from_secs(5)).await;
}

/// What must not show of `url`: itself, each `host:port` (and `host`)
/// it names, its password, and the loopback names.
fn secrets(url: &str) -> Vec<String> {
    let mut out = vec![
        url.to_owned(),
        "127.0.0.1".to_owned(),
        "localhost".to_owned(),
    ];
    let Some((_, rest)) = url.split_once("://") else {
        return out;
    };
    let (userinfo, hosts) = match rest.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, rest),
    };
    if let Some((_, password)) = userinfo.and_then(|u| u.split_once(':')) {
        // A short password ("pw") could match anything; a real one not.
        if password.len() >= 4 {
            out.push(password.to_owned());
        }
    }
    let hosts = hosts.split(['/', '?', '#']).next().unwrap_or_default();
    for host_port in hosts.split(',').filter(|h| !h.is_empty()) {
        out.push(host_port.to_owned());
        let host = host_port
            .rsplit_once(':')
            .map_or(host_port, |(host, _)| host);
        if host.len() >= 4 {
            out.push(host.to_owned());
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_what_must_not_show() {
        let got = secrets("amqp://guest:s3cret@rabbit.internal:5672/ezmq-dev");
        for expected in [
            "s3cret",
            "rabbit.internal:5672",
            "rabbit.internal",
            "127.0.0.1",
        ] {
            assert!(got.iter().any(|s| s == expected), "{expected} in {got:?}");
        }
        let got = secrets("disque://127.0.0.1:7711,127.0.0.1:7712");
        assert!(got.iter().any(|s| s == "127.0.0.1:7712"), "{got:?}");
        assert_eq!(secrets("memory://").len(), 3);
    }
}
