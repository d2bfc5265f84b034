//! The end-to-end cases, each run against every broker that has what it
//! needs.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ezmq::prelude::*;
use ezmq::{ConsumeOptions, Job};
use ezmq_test_support::eventually;

use super::{ezmq, ezmq_traced, topic, Out};

/// What the backend under test can do.
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    /// It can peek (Disque, Redis).
    pub peek: bool,
    /// It counts in-flight jobs (Redis).
    pub in_flight: bool,
    /// It finds jobs by id: scheduled, cancel, promote (Redis).
    pub job_store: bool,
}

/// The `--json stats` record of one topic.
pub async fn stats(url: &str, topic: &str) -> serde_json::Value {
    let out = ezmq(url, &["--json", "stats", topic]).await.ok();
    let json = out.json();
    json[0].clone()
}

/// push, then stats and peek (JSON and tables) see the jobs.
pub async fn push_stats_peek(url: &str, caps: Caps) {
    let t = topic("push");
    let out = ezmq(url, &["push", &t, "hello"]).await.ok();
    assert!(!out.stdout.trim().is_empty(), "push prints the id");
    let out = ezmq(
        url,
        &[
            "--json",
            "push",
            &t,
            "{\"n\":2}",
            "--header",
            "tenant=acme",
            "--header",
            "k=v=w",
        ],
    )
    .await
    .ok();
    assert_eq!(out.json()["topic"], t.as_str());

    let s = stats(url, &t).await;
    assert_eq!(s["topic"], t.as_str());
    assert_eq!(s["waiting"], 2, "{s}");
    assert_eq!(s["dead_letters"], 0, "{s}");
    if caps.in_flight {
        assert_eq!(s["in_flight"], 0, "{s}");
    } else {
        assert!(s["in_flight"].is_null(), "{s}");
    }
    let table = ezmq(url, &["stats", &t]).await.ok().stdout;
    assert!(table.starts_with("TOPIC"), "{table}");
    assert!(table.contains(&t), "{table}");

    let peek = ezmq(url, &["--json", "peek", &t, "-n", "5"]).await;
    if !caps.peek {
        let peek = peek.expect_code(4);
        assert!(
            peek.stderr.contains("capability missing"),
            "{}",
            peek.stderr
        );
        return;
    }
    let jobs = peek.ok().json();
    let jobs = jobs.as_array().expect("an array");
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    assert_eq!(jobs[0]["body"], "hello");
    assert_eq!(jobs[1]["body"], "{\"n\":2}");
    assert_eq!(jobs[1]["headers"]["tenant"], "acme");
    assert_eq!(jobs[1]["headers"]["k"], "v=w");
    let table = ezmq(url, &["peek", &t]).await.ok().stdout;
    assert!(table.contains("tenant=acme"), "{table}");
    // Peeking consumed nothing.
    assert_eq!(stats(url, &t).await["waiting"], 2);
}

/// A delayed push is not waiting before its delay, and a listener gets it
/// no earlier than the delay.
pub async fn push_delay(url: &str) {
    let t = topic("delay");
    let pushed = std::time::Instant::now();
    ezmq(url, &["push", &t, "later", "--delay", "1s"])
        .await
        .ok();
    assert_eq!(stats(url, &t).await["waiting"], 0);
    let client = ezmq::connect_url(url).await.expect("connect");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let listener = client
        .add_consume_listener(&t, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send((job.body().clone(), std::time::Instant::now()));
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .expect("listener");
    let (body, at) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("delivered in time")
        .expect("a job");
    assert_eq!(&body[..], b"later");
    assert!(
        at.duration_since(pushed) >= Duration::from_millis(900),
        "delivered early"
    );
    listener.stop(Duration::from_secs(5)).await;
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

/// A listener fails a job into the dead-letter topic; `dead-letters` shows
/// it; `--requeue` puts it back and a now-succeeding listener handles it
/// exactly once, with its headers and attempt 1.
pub async fn dead_letter_round_trip(url: &str, caps: Caps) {
    let t = topic("dl");
    let dead = format!("{t}.dead-letter");
    let client = ezmq::connect_url(url).await.expect("connect");
    let failing = Arc::new(AtomicBool::new(true));
    let handled = Arc::new(AtomicU32::new(0));
    let seen = Arc::new(Mutex::new(Vec::<(Option<String>, u32)>::new()));
    let listener = {
        let (failing, handled, seen) = (failing.clone(), handled.clone(), seen.clone());
        client
            .add_consume_listener_with(
                &t,
                ConsumeOptions::new()
                    .with_max_attempts(2)
                    .with_backoff(Duration::from_millis(10), Duration::from_millis(50)),
                move |job: Job| {
                    let (failing, handled, seen) = (failing.clone(), handled.clone(), seen.clone());
                    async move {
                        if failing.load(Ordering::SeqCst) {
                            return Err(std::io::Error::other("boom: downstream is down"));
                        }
                        handled.fetch_add(1, Ordering::SeqCst);
                        if let Ok(mut seen) = seen.lock() {
                            seen.push((
                                job.headers().get("tenant").map(str::to_owned),
                                job.attempt(),
                            ));
                        }
                        Ok(())
                    }
                },
            )
            .await
            .expect("listener")
    };
    ezmq(url, &["push", &t, "order-1", "--header", "tenant=acme"])
        .await
        .ok();

    let arrived = eventually(Duration::from_secs(30), || async {
        client.queue_len(&dead).await.ok() == Some(1)
    })
    .await;
    assert!(arrived, "the job reached {dead}");
    assert_eq!(stats(url, &t).await["dead_letters"], 1);

    let listing = ezmq(url, &["--json", "dead-letters", &t]).await;
    let requeue_id = if caps.peek {
        let list = listing.ok().json();
        let list = list.as_array().expect("an array").clone();
        assert_eq!(list.len(), 1, "{list:?}");
        let record = &list[0];
        assert_eq!(record["topic"], t.as_str());
        assert_eq!(record["attempts"], 2);
        assert!(
            record["error"].as_str().unwrap_or("").contains("boom"),
            "{record}"
        );
        assert_eq!(record["headers"]["tenant"], "acme");
        assert!(record["failed_at_ms"].as_u64().unwrap_or(0) > 0, "{record}");
        let table = ezmq(url, &["dead-letters", &t]).await.ok().stdout;
        assert!(
            table.contains("LAST FAILURE") && table.contains("boom"),
            "{table}"
        );
        // An unknown id: nothing moves, exit code 1.
        let out = ezmq(url, &["dead-letters", &t, "--requeue", "no-such-id"]).await;
        let out = out.expect_code(1);
        assert!(
            out.stdout.contains("not found: no-such-id"),
            "{}",
            out.stdout
        );
        assert_eq!(client.queue_len(&dead).await.expect("qlen"), 1);
        Some(record["id"].as_str().expect("an id").to_owned())
    } else {
        let out = listing.expect_code(4);
        assert!(out.stderr.contains("capability missing"), "{}", out.stderr);
        None
    };

    failing.store(false, Ordering::SeqCst);
    let out: Out = match &requeue_id {
        Some(id) => ezmq(url, &["--json", "dead-letters", &t, "--requeue", id]).await,
        None => ezmq(url, &["--json", "dead-letters", &t, "--requeue", "--all"]).await,
    };
    let report = out.ok().json();
    assert_eq!(report["done"], 1, "{report}");

    let done = eventually(Duration::from_secs(30), || async {
        handled.load(Ordering::SeqCst) >= 1
    })
    .await;
    assert!(done, "the requeued job was handled");
    let settled = eventually(Duration::from_secs(10), || async {
        client.queue_len(&dead).await.ok() == Some(0) && client.queue_len(&t).await.ok() == Some(0)
    })
    .await;
    assert!(settled, "nothing left in {t} or {dead}");
    // Give a duplicate the time to show up: there must be none.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(handled.load(Ordering::SeqCst), 1, "handled exactly once");
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(seen, vec![(Some("acme".to_owned()), 1)]);
    listener.stop(Duration::from_secs(5)).await;
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

/// `--purge` refuses without a terminal or `--yes` (exit 5), then deletes
/// every dead letter with `--yes`.
pub async fn purge(url: &str) {
    let t = topic("purge");
    let dead = format!("{t}.dead-letter");
    for i in 0..3 {
        ezmq(url, &["push", &dead, &format!("not a record {i}")])
            .await
            .ok();
    }
    let out = ezmq(url, &["dead-letters", &t, "--purge"])
        .await
        .expect_code(5);
    assert!(out.stderr.contains("--yes"), "{}", out.stderr);
    assert_eq!(stats(url, &t).await["dead_letters"], 3);
    let report = ezmq(url, &["--json", "dead-letters", &t, "--purge", "--yes"])
        .await
        .ok()
        .json();
    assert_eq!(report["done"], 3, "{report}");
    assert_eq!(stats(url, &t).await["dead_letters"], 0);
}

/// `groups` lists the broadcast groups with their live members; a member
/// that stops leaves the count.
pub async fn groups(url: &str) {
    let t = topic("bc");
    let a = ezmq::connect_url(url).await.expect("connect");
    let b = ezmq::connect_url(url).await.expect("connect");
    let handler = || ezmq::handler_fn(|_job: Job| async { Ok::<(), std::io::Error>(()) });
    let l1 = a
        .add_broadcast_listener(&t, "billing", Arc::new(handler()))
        .await
        .expect("join");
    let l2 = a
        .add_broadcast_listener(&t, "audit", Arc::new(handler()))
        .await
        .expect("join");
    let l3 = b
        .add_broadcast_listener(&t, "audit", Arc::new(handler()))
        .await
        .expect("join");
    let listed = eventually(Duration::from_secs(10), || async {
        let groups = ezmq(url, &["--json", "groups", &t]).await.ok().json();
        groups
            == serde_json::json!([
                { "name": "audit", "members": 2, "waiting": groups[0]["waiting"] },
                { "name": "billing", "members": 1, "waiting": groups[1]["waiting"] },
            ])
    })
    .await;
    let out = ezmq(url, &["groups", &t]).await.ok();
    assert!(
        listed,
        "audit with 2 members, billing with 1:\n{}",
        out.stdout
    );
    assert!(out.stdout.starts_with("GROUP"), "{}", out.stdout);
    // A member that stops leaves the count within a heartbeat.
    l3.stop(Duration::from_secs(5)).await;
    let left = eventually(Duration::from_secs(15), || async {
        let groups = ezmq(url, &["--json", "groups", &t]).await.ok().json();
        groups[0]["name"] == "audit" && groups[0]["members"] == 1
    })
    .await;
    let out = ezmq(url, &["groups", &t]).await.ok();
    assert!(left, "audit down to 1 member:\n{}", out.stdout);
    for l in [&l1, &l2, &l3] {
        l.stop(Duration::from_secs(5)).await;
    }
    a.shutdown(Duration::from_secs(5)).await.expect("shutdown");
    b.shutdown(Duration::from_secs(5)).await.expect("shutdown");
}

/// `cron list` shows a running crontab with the tick it ran, and `cron
/// history` the run; without peek (RabbitMQ) the list comes from
/// presence alone (the last tick from the process's record) and `cron
/// history` exits with 4. The crontab leaves the list once its process
/// stops.
pub async fn cron_list(url: &str, peeks: bool) {
    let name = topic("cron");
    let client = ezmq::connect_url(url).await.expect("connect");
    let mut rx = super::every_second(&client, &name).await;
    let ran = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a tick in time")
        .expect("a tick");
    let listed = cron_listed(url, &name, |last| {
        last.as_str()
            .is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok_and(|t| t >= ran))
    })
    .await;
    let out = ezmq(url, &["cron", "list"]).await.ok();
    assert!(listed, "{name} listed with its last tick:\n{}", out.stdout);
    assert!(out.stdout.contains(&name), "{}", out.stdout);
    if !peeks {
        let out = ezmq(url, &["cron", "history", &name]).await.expect_code(4);
        assert!(out.stderr.contains("capability missing"), "{}", out.stderr);
        cron_gone(url, &client, &name).await;
        return;
    }
    // `cron history`: the run recorded, with who ran it and its outcome.
    let recorded = eventually(Duration::from_secs(10), || async {
        let runs = ezmq(url, &["--json", "cron", "history", &name])
            .await
            .ok()
            .json();
        runs.as_array().is_some_and(|runs| {
            runs.iter().any(|r| {
                r["outcome"] == "succeeded"
                    && r["participant"].as_str().is_some_and(|p| p.contains('/'))
                    && r["tick"].as_str().is_some_and(|t| {
                        chrono::DateTime::parse_from_rfc3339(t).is_ok_and(|t| t >= ran)
                    })
            })
        })
    })
    .await;
    let out = ezmq(url, &["cron", "history", &name]).await.ok();
    assert!(recorded, "{name}'s run in its history:\n{}", out.stdout);
    assert!(out.stdout.starts_with("TICK"), "{}", out.stdout);
    cron_gone(url, &client, &name).await;
}

/// Waits (15 s at most) for `cron list` to show crontab `name` (every
/// second, UTC, one participant, a next tick) with a last tick that
/// `last_tick` accepts.
async fn cron_listed(
    url: &str,
    name: &str,
    last_tick: impl Fn(&serde_json::Value) -> bool,
) -> bool {
    eventually(Duration::from_secs(15), || async {
        let all = ezmq(url, &["--json", "cron", "list"]).await.ok().json();
        all.as_array().is_some_and(|all| {
            all.iter().any(|c| {
                c["name"] == name
                    && c["spec"] == "* * * * * *"
                    && c["timezone"] == "UTC"
                    && last_tick(&c["last_tick"])
                    && c["next_tick"].is_string()
                    && c["participants"].as_array().is_some_and(|p| p.len() == 1)
            })
        })
    })
    .await
}

/// Shuts `client` down: its crontab `name` (its only process) leaves the
/// list at once.
async fn cron_gone(url: &str, client: &ezmq::Client, name: &str) {
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    let gone = eventually(Duration::from_secs(10), || async {
        let all = ezmq(url, &["--json", "cron", "list"]).await.ok().json();
        all.as_array()
            .is_some_and(|all| all.iter().all(|c| c["name"] != name))
    })
    .await;
    let out = ezmq(url, &["cron", "list"]).await.ok();
    assert!(
        gone,
        "{name} still listed after its process stopped:\n{}",
        out.stdout
    );
}

/// `listeners`, `topics` and `stats` without topics show what runs and
/// what waits across processes; a client that shuts down leaves them.
/// `lists_queues`: the broker lists its queues, so a topic that only
/// holds a job is among the topics too (not on RabbitMQ).
pub async fn live_view(url: &str, lists_queues: bool) {
    let consumed = topic("live");
    let waiting = topic("idle");
    let worker = ezmq::connect_url(url).await.expect("connect");
    worker
        .add_consume_listener_with(
            &consumed,
            ConsumeOptions::new().with_concurrency(2),
            |_job: Job| async { Ok::<(), std::io::Error>(()) },
        )
        .await
        .expect("listener");
    let producer = ezmq::connect_url(url).await.expect("connect");
    producer.push(&waiting, "x".into()).await.expect("push");
    let listed = eventually(Duration::from_secs(15), || async {
        let rows = ezmq(url, &["--json", "listeners"]).await.ok().json();
        rows.as_array().is_some_and(|rows| {
            rows.iter().any(|r| {
                r["kind"] == "listener"
                    && r["name"] == consumed.as_str()
                    && r["concurrency"] == 2
                    && r["process"].as_str().is_some_and(|p| p.contains('/'))
            })
        })
    })
    .await;
    let out = ezmq(url, &["listeners"]).await.ok();
    assert!(listed, "{consumed} in listeners:\n{}", out.stdout);
    assert!(out.stdout.starts_with("PROCESS"), "{}", out.stdout);
    let topics = eventually(Duration::from_secs(15), || async {
        let rows = ezmq(url, &["--json", "topics"]).await.ok().json();
        let row = |name: &str| {
            rows.as_array()
                .and_then(|rows| rows.iter().find(|r| r["topic"] == name).cloned())
        };
        row(&consumed).is_some_and(|r| r["listeners"] == 1)
            && (row(&waiting).is_some() || !lists_queues)
    })
    .await;
    let out = ezmq(url, &["topics"]).await.ok();
    assert!(
        topics,
        "{consumed} (1 listener) and {waiting} in topics:\n{}",
        out.stdout
    );
    let all = ezmq(url, &["--json", "stats"]).await.ok().json();
    let row = |name: &str| {
        all.as_array()
            .and_then(|rows| rows.iter().find(|r| r["topic"] == name).cloned())
    };
    assert!(
        row(&consumed).is_some_and(|r| r["waiting"] == 0),
        "{consumed} in stats of every topic: {all}"
    );
    if lists_queues {
        assert!(
            row(&waiting).is_some_and(|r| r["waiting"] == 1),
            "{waiting} with 1 waiting in stats of every topic: {all}"
        );
    }
    worker
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    let gone = eventually(Duration::from_secs(10), || async {
        let rows = ezmq(url, &["--json", "listeners"]).await.ok().json();
        rows.as_array()
            .is_some_and(|rows| rows.iter().all(|r| r["name"] != consumed.as_str()))
    })
    .await;
    let out = ezmq(url, &["listeners"]).await.ok();
    assert!(
        gone,
        "{consumed} still listed after its client shut down:\n{}",
        out.stdout
    );
    let taken = producer
        .admin()
        .take(
            &ezmq::Topic::new(&waiting).expect("topic"),
            1,
            Duration::from_secs(5),
        )
        .await
        .expect("take");
    let handles: Vec<_> = taken.into_iter().map(|d| d.handle).collect();
    producer.admin().ack_all(&handles).await.expect("ack");
    producer
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

/// A password in the URL never shows in what the CLI prints, logging at
/// `trace`: with the right one (`right`: a push and `stats` work) and a
/// wrong one (`wrong`: refused, saying the credentials are wrong).
pub async fn secrets_never_printed(right: &str, wrong: &str, secrets: &[&str]) {
    let hidden = |what: &str, out: &Out| {
        for secret in secrets {
            for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
                assert!(
                    !text.contains(secret),
                    "{what}: {stream} shows the password:\n{text}"
                );
            }
        }
    };
    let t = topic("secrets");
    let pushed = ezmq_traced(right, &["push", &t, "hello"]).await;
    hidden("push with the right password", &pushed);
    let pushed = pushed.ok();
    assert!(!pushed.stderr.is_empty(), "RUST_LOG=trace logged nothing");
    let stats = ezmq_traced(right, &["stats", &t]).await;
    hidden("stats with the right password", &stats);
    stats.ok();
    let refused = ezmq_traced(wrong, &["stats", &t]).await;
    hidden("a wrong password", &refused);
    assert_ne!(refused.code, 0, "a wrong password is refused");
    assert!(
        refused.stderr.contains("authentication failed"),
        "the error names the cause:\n{}",
        refused.stderr
    );
}

/// `scheduled` lists delayed jobs, `stats` counts them, `cancel` removes
/// one (a second cancel finds nothing: exit 1), `promote` makes the other
/// due now; without a job store each says the capability is missing.
pub async fn scheduled_cancel_promote(url: &str, caps: Caps) {
    let t = topic("sched");
    let first = ezmq(url, &["push", &t, "one", "--delay", "1h"]).await.ok();
    let second = ezmq(url, &["push", &t, "two", "--delay", "1h"]).await.ok();
    let (first, second) = (
        first.stdout.trim().to_owned(),
        second.stdout.trim().to_owned(),
    );
    if !caps.job_store {
        let out = ezmq(url, &["scheduled", &t]).await.expect_code(4);
        assert!(out.stderr.contains("capability missing"), "{}", out.stderr);
        ezmq(url, &["cancel", &t, &first]).await.expect_code(4);
        ezmq(url, &["promote", &t, &first]).await.expect_code(4);
        assert!(stats(url, &t).await["scheduled"].is_null());
        return;
    }
    assert_eq!(stats(url, &t).await["scheduled"], 2);
    let table = ezmq(url, &["stats", &t]).await.ok().stdout;
    assert!(table.contains("SCHEDULED"), "{table}");
    let listed = ezmq(url, &["--json", "scheduled", &t]).await.ok().json();
    let ids: Vec<&str> = listed
        .as_array()
        .expect("a list")
        .iter()
        .map(|job| job["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids.len(), 2, "{listed}");
    assert!(
        ids.contains(&first.as_str()) && ids.contains(&second.as_str()),
        "{listed}"
    );
    let due = listed[0]["due_at_ms"].as_u64().expect("due time");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    assert!(
        due > now + 3_500_000,
        "due in about an hour: {due} vs {now}"
    );
    assert_eq!(listed[0]["state"], "scheduled");
    let table = ezmq(url, &["scheduled", &t]).await.ok().stdout;
    assert!(table.starts_with("ID"), "{table}");

    let out = ezmq(url, &["cancel", &t, &first]).await.ok();
    assert!(out.stdout.contains("cancelled"), "{}", out.stdout);
    let out = ezmq(url, &["cancel", &t, &first]).await.expect_code(1);
    assert!(out.stderr.contains("no job"), "{}", out.stderr);
    ezmq(url, &["promote", &t, &second]).await.ok();
    let s = stats(url, &t).await;
    assert_eq!(
        (s["scheduled"].as_u64(), s["waiting"].as_u64()),
        (Some(0), Some(1)),
        "{s}"
    );
    let out = ezmq(url, &["promote", &t, &second]).await.expect_code(1);
    assert!(out.stderr.contains("not scheduled"), "{}", out.stderr);
}

/// `pause` stops a listener (one started while paused stays idle, pushes
/// are accepted), `stats` shows PAUSED, a second `pause` says so, and
/// `resume` lets the job through.
pub async fn pause_resume(url: &str) {
    let t = topic("pause");
    let out = ezmq(url, &["pause", &t]).await.ok();
    assert!(out.stdout.contains("paused"), "{}", out.stdout);
    let again = ezmq(url, &["pause", &t]).await.ok();
    assert!(again.stdout.contains("already paused"), "{}", again.stdout);
    assert_eq!(stats(url, &t).await["paused"], true);
    let table = ezmq(url, &["stats", &t]).await.ok().stdout;
    assert!(table.contains("PAUSED"), "{table}");

    let client = ezmq::connect_url(url).await.expect("connect");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let listener = client
        .add_consume_listener(&t, move |job: Job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(job.body().clone());
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .expect("listener");
    ezmq(url, &["push", &t, "held"]).await.ok();
    assert!(
        eventually(Duration::from_secs(30), || async {
            listener.is_topic_paused()
        })
        .await,
        "the listener never saw the pause"
    );
    assert!(
        tokio::time::timeout(Duration::from_secs(2), rx.recv())
            .await
            .is_err(),
        "a paused topic's listener took a job"
    );
    let out = ezmq(url, &["--json", "resume", &t]).await.ok();
    assert_eq!(out.json()["changed"], true);
    let body = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("delivered after resume")
        .expect("a job");
    assert_eq!(&body[..], b"held");
    assert_eq!(stats(url, &t).await["paused"], false);
    let out = ezmq(url, &["resume", &t]).await.ok();
    assert!(out.stdout.contains("was not paused"), "{}", out.stdout);
    listener.stop(Duration::from_secs(5)).await;
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
