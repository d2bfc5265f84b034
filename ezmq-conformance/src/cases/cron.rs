//! Distributed cron (ezmq-crontab) on the backend's exclusive claims.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ezmq_core::spi::Capability;
use ezmq_crontab::CrontabExt;

use crate::support::{assert_unsupported, channel, drain, recv, shutdown, shutdown_all};
use crate::Ctx;

/// Ticks to watch.
const TICKS: usize = 4;

/// [`Capability::ExclusiveClaim`]: three clients register the same
/// crontab, every second; over 4+ ticks each tick runs exactly once across
/// them, and no tick between the first and the last seen is missed.
pub async fn cron_once_per_tick(ctx: Ctx) {
    let name = format!("conf-cron-{}", uuid::Uuid::new_v4().simple());
    let spec = "* * * * * *";
    if !ctx.has(Capability::ExclusiveClaim) {
        let result = ctx
            .client()
            .add_crontab(&name, spec, |_tick: DateTime<Utc>| async {
                Ok::<(), Infallible>(())
            })
            .await;
        assert_unsupported(result, Capability::ExclusiveClaim, "add_crontab");
        ctx.skip_lacking(Capability::ExclusiveClaim);
        shutdown(ctx.client(), Duration::from_secs(5)).await;
        return;
    }

    let clients = [
        ctx.client().clone(),
        ctx.connect().await,
        ctx.connect().await,
    ];
    let (tx, mut rx) = channel();
    for (i, client) in clients.iter().enumerate() {
        let tx = tx.clone();
        client
            .add_crontab(&name, spec, move |tick: DateTime<Utc>| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send((tick, i));
                    Ok::<(), Infallible>(())
                }
            })
            .await
            .expect("add_crontab");
    }

    let mut runs: BTreeMap<DateTime<Utc>, Vec<usize>> = BTreeMap::new();
    while runs.len() < TICKS + 1 {
        let (tick, who) = recv(&mut rx, Duration::from_secs(15), "the next cron tick").await;
        runs.entry(tick).or_default().push(who);
    }
    // A duplicate of the last tick seen would come within its claim window.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    shutdown_all(&clients.iter().collect::<Vec<_>>()).await;
    for (tick, who) in drain(&mut rx) {
        runs.entry(tick).or_default().push(who);
    }

    for (tick, who) in &runs {
        assert_eq!(
            who.len(),
            1,
            "tick {tick} ran {} times (clients {who:?})",
            who.len()
        );
    }
    let ticks: Vec<_> = runs.keys().collect();
    for pair in ticks.windows(2) {
        assert_eq!(
            *pair[1] - *pair[0],
            chrono::Duration::seconds(1),
            "ticks between {} and {} were missed",
            pair[0],
            pair[1]
        );
    }
    let per_client: Vec<usize> = (0..3)
        .map(|i| runs.values().filter(|w| w[0] == i).count())
        .collect();
    println!(
        "{}: {} ticks, once each; runs per client {per_client:?}",
        ctx.case(),
        runs.len()
    );
}
