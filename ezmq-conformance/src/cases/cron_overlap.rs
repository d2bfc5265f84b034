//! The cron overlap policy across processes (ezmq-crontab's run claim).

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ezmq_core::spi::Capability;
use ezmq_core::Client;
use ezmq_crontab::{CrontabExt, CrontabOptions};

use crate::support::{channel, recv_n, shutdown, shutdown_all, SOON};
use crate::Ctx;

/// Runs to watch per policy.
const RUNS: usize = 3;

/// How long each run takes: longer than two periods of the every-second
/// schedule.
const RUN_TIME: Duration = Duration::from_millis(2500);

/// Two clients register the same every-second crontab with a handler that
/// runs 2.5 s. With the default policy (skip) no two runs are ever going
/// at once, across both clients, and consecutive runs start at least 2 s
/// apart; with `allow_overlap` runs of consecutive ticks do overlap.
pub async fn cron_skips_overlapping_runs(ctx: Ctx) {
    if !ctx.has(Capability::ExclusiveClaim) {
        // cron_once_per_tick checks the refusal.
        ctx.skip_lacking(Capability::ExclusiveClaim);
        shutdown(ctx.client(), Duration::from_secs(5)).await;
        return;
    }
    let clients = [ctx.client().clone(), ctx.connect().await];
    for allow_overlap in [false, true] {
        let starts = watch(&clients, allow_overlap).await;
        let most = starts.iter().map(|(_, active)| *active).max().unwrap_or(0);
        if allow_overlap {
            assert!(most >= 2, "allow_overlap: runs must overlap: {starts:?}");
        } else {
            assert_eq!(most, 1, "two runs were going at once: {starts:?}");
            for pair in starts.windows(2) {
                assert!(
                    pair[1].0 - pair[0].0 >= 2,
                    "a run started while the previous one was going: {starts:?}"
                );
            }
        }
    }
    let refs: Vec<&Client> = clients.iter().collect();
    shutdown_all(&refs).await;
}

/// Registers one crontab on every client, waits for [`RUNS`] starts, and
/// returns them in order: (tick, runs going when it started).
async fn watch(clients: &[Client], allow_overlap: bool) -> Vec<(i64, usize)> {
    let name = format!("conf-overlap-{}", uuid::Uuid::new_v4().simple());
    let active = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = channel::<(i64, usize)>();
    for client in clients {
        let (active, tx) = (Arc::clone(&active), tx.clone());
        client
            .add_crontab_with(
                &name,
                "* * * * * *",
                CrontabOptions::default().with_allow_overlap(allow_overlap),
                move |tick: DateTime<Utc>| {
                    let (active, tx) = (Arc::clone(&active), tx.clone());
                    async move {
                        let going = active.fetch_add(1, Ordering::SeqCst) + 1;
                        let _ = tx.send((tick.timestamp(), going));
                        tokio::time::sleep(RUN_TIME).await;
                        active.fetch_sub(1, Ordering::SeqCst);
                        Ok::<(), Infallible>(())
                    }
                },
            )
            .await
            .expect("add_crontab_with");
    }
    let mut starts = recv_n(&mut rx, RUNS, SOON, "crontab runs").await;
    for client in clients {
        client.remove_crontab(&name).await;
    }
    starts.sort_unstable();
    starts
}
