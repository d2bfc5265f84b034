//! Per-key rate limits
//! ([`ConsumeOptions::with_rate_limit_by`](ezmq_core::ConsumeOptions::with_rate_limit_by)):
//! a noisy key's backlog is held to its own limit, and a quiet key's jobs
//! start promptly beside it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ezmq_core::spi::Capability;
use ezmq_core::{Client, ConsumeOptions, Job, MqClient, MqClientExt, PushOptions, RateKey};
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

use crate::support::{channel, listener_option_gate, recv_n, shutdown_all, until_held_back, SOON};
use crate::Ctx;

/// The noisy key's backlog.
const BACKLOG: usize = 2000;
/// Each key's limit: starts per period.
const RATE: u32 = 20;
/// The limit's period: 10 a second, counted over 2 s (the bound on a
/// quiet key's wait is two periods; the backlog's first pass through
/// the ready queue took up to 1.5 s on the embedded Disque cluster here).
const PERIOD: Duration = Duration::from_secs(2);
/// The quiet key's jobs, pushed one every [`QUIET_EVERY`].
const QUIET: usize = 10;
const QUIET_EVERY: Duration = Duration::from_millis(300);
/// Clients, each with one listener.
const CLIENTS: usize = 3;
/// Each listener's concurrency.
const CONCURRENCY: usize = 32;

/// Listeners on three clients at concurrency 32, limited to 20 starts per
/// 2 s per tenant: a tenant with a 2,000-job backlog, and another that
/// pushes a job every 300 ms behind it. Each quiet job starts within two
/// periods of its push; the noisy tenant starts at its limit (over the
/// run at most 10/s plus a period's worth, and at least half of that: its backlog
/// is not lost in deferrals), each of its jobs once, as attempt 1 (a
/// deferral is not an attempt); `Admin::flow` shows the limit and that
/// it holds jobs back. A bad limit is refused at registration.
pub async fn rate_limit_by_key_keeps_quiet_keys_prompt(ctx: Ctx) {
    let a = ctx.client();
    let name = ctx.topic("keyed");
    let tenant = RateKey::header("tenant");
    let limited = ConsumeOptions::new()
        .with_concurrency(CONCURRENCY)
        .with_rate_limit_by(tenant.clone(), RATE, PERIOD);
    let bad = ConsumeOptions::new().with_rate_limit_by(tenant, 0, PERIOD);
    let gate = listener_option_gate(
        &ctx,
        &name,
        limited.clone(),
        Capability::RateLimitByKey,
        bad,
        "rate_limit_by",
    );
    if !gate.await {
        return;
    }

    let mut clients = vec![a.clone()];
    for _ in 1..CLIENTS {
        clients.push(ctx.connect().await);
    }
    let noisy = (0..BACKLOG)
        .map(|n| {
            (
                format!("noisy-{n}").into(),
                PushOptions::new().with_header("tenant", "noisy"),
            )
        })
        .collect();
    for pushed in a.push_batch(&name, noisy).await.expect("noisy backlog") {
        pushed.expect("noisy job");
    }
    let (tx, mut rx) = channel::<Start>();
    for client in &clients {
        listen(client, &name, limited.clone(), tx.clone()).await;
    }
    let began = Instant::now();
    let mut pushed_at = HashMap::new();
    for n in 0..QUIET {
        let body = format!("quiet-{n}");
        pushed_at.insert(body.clone(), Instant::now());
        a.push_with(
            &name,
            body.into(),
            PushOptions::new().with_header("tenant", "quiet"),
        )
        .await
        .expect("quiet job");
        tokio::time::sleep(QUIET_EVERY).await;
    }
    until_held_back(a, &name, |limits| {
        limits
            .rate_limit_by
            .as_ref()
            .is_some_and(|k| k.limit.n() == RATE && k.key.header_name() == "tenant")
    })
    .await;

    let mut quiet = Vec::new();
    let mut noisy = Vec::new();
    let deadline = SOON + QUIET_EVERY * u32::try_from(QUIET).unwrap_or(0);
    while quiet.len() < QUIET {
        let start = recv_n(&mut rx, 1, deadline, "the quiet tenant's jobs").await;
        for start in start {
            if start.body.starts_with("quiet") {
                quiet.push(start);
            } else {
                noisy.push(start);
            }
        }
    }
    let window = began.elapsed();
    let late: Vec<(String, Duration)> = quiet
        .iter()
        .map(|s| (s.body.clone(), s.at - pushed_at[&s.body]))
        .filter(|(_, waited)| *waited > PERIOD * 2)
        .collect();
    assert!(
        late.is_empty(),
        "quiet jobs waited more than two periods behind the noisy backlog: {late:?}"
    );
    let slowest = quiet
        .iter()
        .map(|s| s.at - pushed_at[&s.body])
        .max()
        .unwrap_or_default();
    while let Ok(start) = rx.try_recv() {
        if start.at - began <= window {
            noisy.push(start);
        }
    }
    let most = f64::from(RATE) * (window + PERIOD).as_secs_f64() / PERIOD.as_secs_f64() + 2.0;
    let least =
        f64::from(RATE) * (window.as_secs_f64() - 2.0).max(0.0) / PERIOD.as_secs_f64() / 2.0;
    let count = noisy.len() as f64;
    assert!(
        (least..=most).contains(&count),
        "the noisy tenant started {count} jobs in {window:?}, not within {least:.0}..={most:.0} (its limit is {RATE} per {PERIOD:?})"
    );
    let mut seen = HashMap::new();
    for start in &noisy {
        assert_eq!(
            start.attempt, 1,
            "{} started as attempt {}",
            start.body, start.attempt
        );
        *seen.entry(start.body.as_str()).or_insert(0) += 1;
    }
    assert!(seen.values().all(|n| *n == 1), "a noisy job started twice");
    println!(
        "{}: quiet jobs started at most {slowest:?} after their push behind {BACKLOG} noisy jobs; {} noisy starts in {window:?} under {RATE}/{PERIOD:?} per key",
        ctx.backend(),
        noisy.len()
    );
    let refs: Vec<&Client> = clients.iter().collect();
    shutdown_all(&refs).await;
}

/// One handler start.
#[derive(Debug)]
struct Start {
    body: String,
    attempt: u32,
    at: Instant,
}

/// A listener on `name` whose handler reports each start, then takes 5 ms.
async fn listen(client: &Client, name: &str, options: ConsumeOptions, tx: UnboundedSender<Start>) {
    let tx = Arc::new(tx);
    client
        .add_consume_listener_with(name, options, move |job: Job| {
            let tx = Arc::clone(&tx);
            async move {
                let _ = tx.send(Start {
                    body: String::from_utf8_lossy(job.body()).into_owned(),
                    attempt: job.attempt(),
                    at: Instant::now(),
                });
                tokio::time::sleep(Duration::from_millis(5)).await;
                Ok::<(), std::convert::Infallible>(())
            }
        })
        .await
        .expect("a listener limited per key");
}
