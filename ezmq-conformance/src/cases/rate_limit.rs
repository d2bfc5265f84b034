//! Cluster-wide rate limits
//! ([`ConsumeOptions::with_rate_limit`](ezmq_core::ConsumeOptions::with_rate_limit)):
//! listeners on several clients together start no more handlers than the
//! limit allows, and no fewer while there is a backlog.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ezmq_core::spi::Capability;
use ezmq_core::{Client, ConsumeOptions, Job, MqClient, MqClientExt, PushOptions};
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

use crate::support::{
    assert_quiet, channel, listener_option_gate, recv_n, shutdown_all, until_held_back, SOON,
};
use crate::Ctx;

/// Jobs in the backlog.
const JOBS: usize = 1000;
/// The limit: starts per second, over every listener.
const RATE: u32 = 50;
/// Clients, each with one listener.
const CLIENTS: usize = 3;
/// Each listener's concurrency.
const CONCURRENCY: usize = 8;

/// A backlog of 1,000 jobs drains through listeners on three clients at
/// concurrency 8 under one limit of 50 per second: the overall rate is
/// at most 50/s + 10 % and at least the broker's
/// [`rate_limit_floor`](crate::Broker::rate_limit_floor) of it (90 %), no second holds more starts than the bound (50 plus twice
/// the burst of 5), and every job runs once; `Admin::flow` shows the limit
/// and that it holds the backlog back. A listener with a bad limit is
/// refused at registration.
pub async fn rate_limit_holds_across_clients(ctx: Ctx) {
    let a = ctx.client();
    let name = ctx.topic("rated");
    let limited = ConsumeOptions::new()
        .with_concurrency(CONCURRENCY)
        .with_rate_limit(RATE, Duration::from_secs(1));
    let bad = ConsumeOptions::new().with_rate_limit(0, Duration::from_secs(1));
    let gate = listener_option_gate(
        &ctx,
        &name,
        limited.clone(),
        Capability::RateLimit,
        bad,
        "rate_limit",
    );
    if !gate.await {
        return;
    }

    let mut clients = vec![a.clone()];
    for _ in 1..CLIENTS {
        clients.push(ctx.connect().await);
    }
    let jobs = (0..JOBS)
        .map(|n| (format!("job-{n}").into(), PushOptions::new()))
        .collect();
    for pushed in a.push_batch(&name, jobs).await.expect("backlog") {
        pushed.expect("backlog job");
    }
    let (tx, mut rx) = channel::<(String, Instant)>();
    for client in &clients {
        listen(client, &name, limited.clone(), tx.clone()).await;
    }
    // Tools see the limit and that it holds the backlog back.
    until_held_back(a, &name, |limits| {
        limits
            .rate_limit
            .is_some_and(|r| r.n() == RATE && r.per() == Duration::from_secs(1))
    })
    .await;
    let bound = SOON + Duration::from_secs(u64::try_from(JOBS).unwrap_or(0) / u64::from(RATE));
    let mut started = recv_n(&mut rx, JOBS, bound, "starts under the rate limit").await;
    assert_quiet(&mut rx, Duration::from_millis(500), "a job run twice").await;
    let bodies: HashSet<&str> = started.iter().map(|(body, _)| body.as_str()).collect();
    assert_eq!(bodies.len(), JOBS, "every job ran once");

    started.sort_by_key(|(_, at)| *at);
    let first = started[0].1;
    let span = started[JOBS - 1].1 - first;
    // The first burst comes at once; the rest at the rate.
    let rate = (JOBS - 1) as f64 / span.as_secs_f64();
    let expected = f64::from(RATE);
    assert!(
        rate <= expected * 1.1,
        "{JOBS} jobs ran at {rate:.1}/s over {span:?}, above {RATE}/s + 10 %"
    );
    match ctx.broker().rate_limit_floor() {
        Some(floor) => assert!(
            rate >= expected * floor,
            "{JOBS} jobs ran at {rate:.1}/s over {span:?}, below {:.0} % of {RATE}/s",
            floor * 100.0
        ),
        None => ctx.skip_because(&format!(
            "reaches no floor of its rate limit under the suite's load (this run: {rate:.1}/s of {RATE}/s)"
        )),
    }
    let most = busiest_second(&started);
    let allowed = RATE as usize + 2 * 5;
    assert!(
        most <= allowed,
        "{most} jobs started within one second, above the bound of {allowed}"
    );
    println!(
        "{}: {JOBS} jobs at {rate:.1}/s under {RATE}/s, at most {most} in one second",
        ctx.backend()
    );
    let refs: Vec<&Client> = clients.iter().collect();
    shutdown_all(&refs).await;
}

/// The most starts within any one second.
fn busiest_second(sorted: &[(String, Instant)]) -> usize {
    let mut most = 0;
    let mut from = 0;
    for (to, (_, at)) in sorted.iter().enumerate() {
        while *at - sorted[from].1 >= Duration::from_secs(1) {
            from += 1;
        }
        most = most.max(to - from + 1);
    }
    most
}

/// A listener on `name` whose handler reports each job's body and start,
/// then takes 20 ms.
async fn listen(
    client: &Client,
    name: &str,
    options: ConsumeOptions,
    tx: UnboundedSender<(String, Instant)>,
) {
    let tx = Arc::new(tx);
    client
        .add_consume_listener_with(name, options, move |job: Job| {
            let tx = Arc::clone(&tx);
            async move {
                let _ = tx.send((
                    String::from_utf8_lossy(job.body()).into_owned(),
                    Instant::now(),
                ));
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok::<(), std::convert::Infallible>(())
            }
        })
        .await
        .expect("a rate-limited listener");
}
