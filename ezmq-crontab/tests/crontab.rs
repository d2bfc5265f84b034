//! Crontabs over real TCP against the test broker (embedded Disque, or the
//! nodes in `EZMQ_TEST_DISQUE_ADDRS`).

use std::collections::{BTreeMap, HashSet};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use ezmq_core::{Error, MqClient};
use ezmq_crontab::{CrontabExt, CrontabOptions, MissedTicks};
use ezmq_test_support::{init_tracing, unique_topic, TestBroker};
use tokio::sync::mpsc;
use tokio::time::timeout;

const EVERY_SECOND: &str = "* * * * * *";
const GRACE: Duration = Duration::from_secs(5);

/// The next message, failing the test after `within`.
async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>, within: Duration) -> T {
    timeout(within, rx.recv())
        .await
        .expect("timed out waiting for a tick")
        .expect("channel closed")
}

/// Everything still to come until every sender is gone (the schedulers
/// holding the handlers have stopped).
async fn drain<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> Vec<T> {
    let mut rest = Vec::new();
    while let Some(item) = timeout(Duration::from_secs(15), rx.recv())
        .await
        .expect("schedulers did not stop")
    {
        rest.push(item);
    }
    rest
}

/// Asserts every tick ran once and the ticks are consecutive seconds;
/// returns the ticks in order.
fn assert_exactly_once<W: std::fmt::Debug + Clone>(events: &[(i64, W)]) -> Vec<i64> {
    let mut per_tick: BTreeMap<i64, Vec<W>> = BTreeMap::new();
    for (tick, who) in events {
        per_tick.entry(*tick).or_default().push(who.clone());
    }
    for (tick, runners) in &per_tick {
        assert_eq!(
            runners.len(),
            1,
            "tick {tick} ran {} times: {runners:?}",
            runners.len()
        );
    }
    let ticks: Vec<i64> = per_tick.keys().copied().collect();
    for pair in ticks.windows(2) {
        assert_eq!(
            pair[1],
            pair[0] + 1,
            "ticks missing between {} and {}: {ticks:?}",
            pair[0],
            pair[1]
        );
    }
    ticks
}

fn distinct_ticks<W>(events: &[(i64, W)]) -> usize {
    events.iter().map(|e| e.0).collect::<HashSet<_>>().len()
}

async fn noop(_tick: DateTime<Utc>) -> Result<(), Infallible> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clients_run_each_tick_once_also_after_one_stops() {
    init_tracing();
    let broker = TestBroker::start().await;
    let name = unique_topic("cron-three");
    let (tx, mut rx) = mpsc::unbounded_channel::<(i64, usize)>();
    let mut clients = Vec::new();
    for index in 0..3 {
        let client = broker.client().await;
        let tx = tx.clone();
        client
            .add_crontab(&name, EVERY_SECOND, move |tick: DateTime<Utc>| {
                let _ = tx.send((tick.timestamp(), index));
                async { Ok::<(), Infallible>(()) }
            })
            .await
            .unwrap();
        clients.push(Some(client));
    }
    drop(tx);

    let mut events = Vec::new();
    while distinct_ticks(&events) < 10 {
        events.push(recv(&mut rx, Duration::from_secs(10)).await);
    }
    let &(_, last_runner) = events.iter().max_by_key(|e| e.0).unwrap();
    clients[last_runner]
        .take()
        .unwrap()
        .shutdown(GRACE)
        .await
        .unwrap();
    let stopped_at = Utc::now().timestamp();

    let after_stop = |events: &[(i64, usize)]| events.iter().filter(|e| e.0 > stopped_at).count();
    while after_stop(&events) < 3 {
        events.push(recv(&mut rx, Duration::from_secs(10)).await);
    }
    for client in clients.into_iter().flatten() {
        client.shutdown(GRACE).await.unwrap();
    }
    events.extend(drain(&mut rx).await);

    let ticks = assert_exactly_once(&events);
    assert!(ticks.len() >= 13, "{ticks:?}");
    for &(tick, runner) in &events {
        assert!(
            !(runner == last_runner && tick > stopped_at),
            "stopped client {runner} ran tick {tick} after its shutdown"
        );
    }
}

#[cfg(feature = "participant")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_run_each_tick_once() {
    use std::process::Stdio;

    init_tracing();
    let broker = TestBroker::start().await;
    let addrs = broker.addrs().join(",");
    let name = unique_topic("cron-procs");
    let mut children = Vec::new();
    for _ in 0..3 {
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ezmq-cron-participant"))
            .args([addrs.as_str(), name.as_str(), "12"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn ezmq-cron-participant");
        children.push(child);
    }
    let mut events: Vec<(i64, u32)> = Vec::new();
    let mut pids = HashSet::new();
    for child in children {
        let output = timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("participant did not exit")
            .expect("wait for participant");
        assert!(
            output.status.success(),
            "participant failed: {:?}",
            output.status
        );
        let stdout = String::from_utf8(output.stdout).expect("utf-8 output");
        for line in stdout.lines() {
            let parts: Vec<&str> = line.split_whitespace().collect();
            assert!(
                parts.len() == 3 && parts[0] == "tick",
                "unexpected line {line:?}"
            );
            let tick: i64 = parts[1].parse().expect("tick seconds");
            let pid: u32 = parts[2].parse().expect("pid");
            pids.insert(pid);
            events.push((tick, pid));
        }
    }
    let ticks = assert_exactly_once(&events);
    assert!(ticks.len() >= 10, "only {} ticks: {ticks:?}", ticks.len());
    eprintln!("{} ticks run by {} processes", ticks.len(), pids.len());
}

#[tokio::test]
async fn registration_errors_listing_and_remove() {
    init_tracing();
    let broker = TestBroker::start().await;
    let client = broker.client().await;

    // Invalid expressions are rejected at registration, with the reason.
    let name = unique_topic("cron-bad");
    for bad in ["* * *", "61 * * * * *", "every minute"] {
        let err = client.add_crontab(&name, bad, noop).await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidOption { option: "spec", .. }),
            "{bad}: {err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains("not a valid cron expression") && message.contains(bad),
            "{message}"
        );
    }
    let err = client
        .add_crontab("bad name", EVERY_SECOND, noop)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidTopic { .. }), "{err:?}");
    assert!(client.crontabs().is_empty());

    // A classic 5-field expression is accepted; the listing shows the next
    // tick; a second registration of the name fails.
    let minutely = unique_topic("cron-minutely");
    let before = Utc::now();
    client
        .add_crontab(&minutely, "* * * * *", noop)
        .await
        .unwrap();
    let err = client
        .add_crontab(&minutely, "* * * * *", noop)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidOption { option: "name", .. }),
        "{err:?}"
    );
    let list = client.crontabs();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].name, minutely);
    assert_eq!(list[0].spec, "* * * * *");
    let next = list[0].next_tick.expect("next tick");
    assert_eq!(next.second(), 0);
    assert!(
        next > before && next <= Utc::now() + chrono::Duration::seconds(60),
        "{next}"
    );

    // remove_crontab stops the ticks.
    let secondly = unique_topic("cron-removed");
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_crontab(&secondly, EVERY_SECOND, move |tick: DateTime<Utc>| {
            let _ = tx.send(tick);
            async { Ok::<(), Infallible>(()) }
        })
        .await
        .unwrap();
    assert_eq!(client.crontabs().len(), 2);
    let first = recv(&mut rx, Duration::from_secs(10)).await;
    let second = recv(&mut rx, Duration::from_secs(10)).await;
    assert_eq!((second - first).num_seconds(), 1);
    assert!(client.remove_crontab(&secondly).await);
    let removed_at = Utc::now();
    assert!(!client.remove_crontab(&secondly).await);
    let names: Vec<String> = client.crontabs().into_iter().map(|i| i.name).collect();
    assert_eq!(names, vec![minutely.clone()]);
    // The channel closes once the scheduler is gone; nothing ran later.
    for tick in drain(&mut rx).await {
        assert!(
            tick <= removed_at,
            "tick {tick} ran after removal at {removed_at}"
        );
    }
    client.shutdown(GRACE).await.unwrap();
    assert!(matches!(
        client
            .add_crontab(&unique_topic("cron-late"), EVERY_SECOND, noop)
            .await,
        Err(Error::Shutdown)
    ));
}

#[tokio::test]
async fn run_once_catches_up_the_last_missed_tick_once() {
    init_tracing();
    let broker = TestBroker::start().await;
    let name = unique_topic("cron-catch-up");
    let options = CrontabOptions::default().with_missed_ticks(MissedTicks::RunOnce);
    let every_minute = "0 * * * * *";

    let first = broker.client().await;
    let (tx_a, mut rx_a) = mpsc::unbounded_channel();
    let registered_at = Utc::now();
    first
        .add_crontab_with(
            &name,
            every_minute,
            options.clone(),
            move |tick: DateTime<Utc>| {
                let _ = tx_a.send(tick);
                async { Ok::<(), Infallible>(()) }
            },
        )
        .await
        .unwrap();
    // Nobody ran the most recent tick: the first participant catches it up.
    let caught_up = recv(&mut rx_a, Duration::from_secs(10)).await;
    assert!(caught_up <= registered_at, "{caught_up} > {registered_at}");
    assert!(registered_at - caught_up <= chrono::Duration::seconds(60));
    assert_eq!(caught_up.second(), 0);

    // A second participant starting now finds that tick claimed.
    let second = broker.client().await;
    let (tx_b, mut rx_b) = mpsc::unbounded_channel();
    second
        .add_crontab_with(&name, every_minute, options, move |tick: DateTime<Utc>| {
            let _ = tx_b.send(tick);
            async { Ok::<(), Infallible>(()) }
        })
        .await
        .unwrap();
    // remove_crontab returns after the catch-up attempt (claim calls are
    // never abandoned); the channel closes when its scheduler is gone.
    assert!(second.remove_crontab(&name).await);
    let ran_by_second = drain(&mut rx_b).await;
    assert!(first.remove_crontab(&name).await);
    let mut ran_by_first = vec![caught_up];
    ran_by_first.extend(drain(&mut rx_a).await);
    for tick in &ran_by_second {
        assert!(!ran_by_first.contains(tick), "tick {tick} ran twice");
    }
    assert!(!ran_by_second.contains(&caught_up));
    first.shutdown(GRACE).await.unwrap();
    second.shutdown(GRACE).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_handler_does_not_overlap_itself_unless_allowed() {
    init_tracing();
    let broker = TestBroker::start().await;
    let client = broker.client().await;

    for allow_overlap in [false, true] {
        let name = unique_topic("cron-slow");
        let active = Arc::new(AtomicUsize::new(0));
        // (tick, runs active when it started)
        let (tx, mut rx) = mpsc::unbounded_channel::<(i64, usize)>();
        client
            .add_crontab_with(
                &name,
                EVERY_SECOND,
                CrontabOptions::default().with_allow_overlap(allow_overlap),
                move |tick: DateTime<Utc>| {
                    let active = Arc::clone(&active);
                    let tx = tx.clone();
                    async move {
                        let now_active = active.fetch_add(1, Ordering::SeqCst) + 1;
                        let _ = tx.send((tick.timestamp(), now_active));
                        tokio::time::sleep(Duration::from_millis(1300)).await;
                        active.fetch_sub(1, Ordering::SeqCst);
                        Ok::<(), Infallible>(())
                    }
                },
            )
            .await
            .unwrap();
        let mut starts = Vec::new();
        for _ in 0..3 {
            starts.push(recv(&mut rx, Duration::from_secs(10)).await);
        }
        assert!(client.remove_crontab(&name).await);
        if allow_overlap {
            assert!(starts.iter().any(|s| s.1 >= 2), "no overlap: {starts:?}");
            assert!(
                starts.windows(2).all(|w| w[1].0 == w[0].0 + 1),
                "{starts:?}"
            );
        } else {
            assert!(starts.iter().all(|s| s.1 == 1), "overlapped: {starts:?}");
            assert!(
                starts.windows(2).all(|w| w[1].0 - w[0].0 >= 2),
                "{starts:?}"
            );
        }
    }
    client.shutdown(GRACE).await.unwrap();
}

#[tokio::test]
async fn handler_errors_and_panics_do_not_stop_the_schedule() {
    init_tracing();
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    let name = unique_topic("cron-failing");
    let calls = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel();
    client
        .add_crontab(&name, EVERY_SECOND, move |tick: DateTime<Utc>| {
            let call = calls.fetch_add(1, Ordering::SeqCst);
            let tx = tx.clone();
            async move {
                match call {
                    0 => panic!("handler panics on purpose (test)"),
                    1 => Err(std::io::Error::other("handler fails on purpose (test)")),
                    _ => {
                        let _ = tx.send(tick);
                        Ok(())
                    }
                }
            }
        })
        .await
        .unwrap();
    let third = recv(&mut rx, Duration::from_secs(15)).await;
    let fourth = recv(&mut rx, Duration::from_secs(10)).await;
    assert_eq!((fourth - third).num_seconds(), 1);
    client.shutdown(GRACE).await.unwrap();
}

#[tokio::test]
async fn catch_up_window_bounds_how_old_a_missed_tick_may_be() {
    init_tracing();
    let hourly = "0 0 * * * *";
    let now = Utc::now();
    let age = i64::from(now.minute() * 60 + now.second());
    if age < 5 {
        println!(
            "skipped: the hour's tick is only {age} s old, too close to tell the windows apart"
        );
        return;
    }
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    let mut ran = Vec::new();
    // A window shorter than the last tick's age, then one longer.
    for window in [Duration::from_secs(2), Duration::from_secs(2 * 3600)] {
        let name = unique_topic("cron-window");
        let (tx, mut rx) = mpsc::unbounded_channel();
        client
            .add_crontab_with(
                &name,
                hourly,
                CrontabOptions::default().with_catch_up_window(window),
                move |tick: DateTime<Utc>| {
                    let _ = tx.send(tick);
                    async { Ok::<(), Infallible>(()) }
                },
            )
            .await
            .unwrap();
        // Returns once the catch-up attempt is over and its run finished.
        assert!(client.remove_crontab(&name).await);
        ran.push(drain(&mut rx).await);
    }
    assert!(
        ran[0].is_empty(),
        "older than the window, yet run: {:?}",
        ran[0]
    );
    assert_eq!(ran[1].len(), 1, "within the window: run once: {:?}", ran[1]);
    assert_eq!((ran[1][0].minute(), ran[1][0].second()), (0, 0));
    client.shutdown(GRACE).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_keeps_the_newest_runs_with_their_outcome() {
    init_tracing();
    let broker = TestBroker::start().await;
    let client = broker.client().await;
    let name = unique_topic("cron-history");
    let (tx, mut rx) = mpsc::unbounded_channel::<i64>();
    client
        .add_crontab_with(
            &name,
            EVERY_SECOND,
            CrontabOptions::default().with_history(3),
            move |tick: DateTime<Utc>| {
                let _ = tx.send(tick.timestamp());
                async move {
                    if tick.timestamp() % 2 == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::other(format!(
                            "boom at {}",
                            tick.timestamp()
                        )))
                    }
                }
            },
        )
        .await
        .unwrap();
    let mut ticks = Vec::new();
    for _ in 0..5 {
        ticks.push(recv(&mut rx, Duration::from_secs(10)).await);
    }
    assert!(client.remove_crontab(&name).await);
    let last = *ticks.last().unwrap();
    let recorded = ezmq_test_support::eventually(Duration::from_secs(10), || async {
        let runs = ezmq_crontab::cron_history(&client, &name, 10)
            .await
            .unwrap();
        runs.first().is_some_and(|run| run.tick.timestamp() == last)
    })
    .await;
    let runs = ezmq_crontab::cron_history(&client, &name, 10)
        .await
        .unwrap();
    assert!(recorded, "the last run was not recorded: {runs:?}");
    assert_eq!(runs.len(), 3, "trimmed to the newest 3: {runs:?}");
    for (run, tick) in runs.iter().zip(ticks.iter().rev()) {
        assert_eq!(run.tick.timestamp(), *tick, "{runs:?}");
        assert!(run.participant.contains('/'), "{run:?}");
        if tick % 2 == 0 {
            assert_eq!(run.outcome, ezmq_crontab::RunOutcome::Succeeded, "{run:?}");
            assert_eq!(run.error, None);
        } else {
            assert_eq!(run.outcome, ezmq_crontab::RunOutcome::Failed, "{run:?}");
            assert_eq!(
                run.error.as_deref(),
                Some(format!("boom at {tick}").as_str())
            );
        }
    }
    client.shutdown(GRACE).await.unwrap();
}
