//! Exclusive claims on the claim log, on the test broker: exactly one of
//! three clients wins each key under contention, a client that starts
//! later reads the claims made before it, a hold ends on time, and only
//! the holder releases. Prints the latency of a claim.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ezmq_core::spi::{ClaimOutcome, ExclusiveClaim};
use ezmq_core::Topic;
use ezmq_kafka::{KafkaBackend, KafkaConfig};

async fn backend(prefix: &str) -> Option<KafkaBackend> {
    let config = KafkaConfig::new(support::url())
        .with_prefix(prefix)
        .with_partitions(1)
        .with_connect_timeout(Duration::from_secs(3));
    support::backend(config).await
}

fn key(name: &str) -> Topic {
    Topic::new(name).expect("a valid key")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_winner_per_key_and_late_readers_agree() {
    let prefix = support::prefix();
    let Some(first) = backend(&prefix).await else {
        return;
    };
    let clients = Arc::new([
        first,
        backend(&prefix).await.expect("a second client"),
        backend(&prefix).await.expect("a third client"),
    ]);
    const KEYS: usize = 40;
    let hold = Duration::from_secs(600);
    let mut tasks = Vec::new();
    for (i, _) in clients.iter().enumerate() {
        let clients = Arc::clone(&clients);
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
            let mut took = Vec::new();
            for k in 0..KEYS {
                let started = Instant::now();
                let outcome = clients[i]
                    .claim(&key(&format!("k{k}")), &format!("client-{i}"), hold)
                    .await
                    .expect("a claim");
                took.push(started.elapsed());
                if outcome == ClaimOutcome::Won {
                    won.push(k);
                }
            }
            (won, took)
        }));
    }
    let mut winners = vec![0; KEYS];
    let mut took = Vec::new();
    for task in tasks {
        let (won, t) = task.await.expect("a claiming task");
        for k in won {
            winners[k] += 1;
        }
        took.extend(t);
    }
    assert!(
        winners.iter().all(|&n| n == 1),
        "winners per key: {winners:?}"
    );
    took.sort();
    println!(
        "claim latency over {} contended claims: median {:?}, p99 {:?}",
        took.len(),
        took[took.len() / 2],
        took[took.len() * 99 / 100]
    );

    // Every client, and one that starts now, names the same holder.
    let late = backend(&prefix).await.expect("a late client");
    for k in 0..KEYS {
        let key = key(&format!("k{k}"));
        let holders = [
            clients[0].holder(&key).await.expect("holder"),
            clients[1].holder(&key).await.expect("holder"),
            late.holder(&key).await.expect("holder"),
        ];
        assert!(holders[0].is_some(), "k{k} has no holder");
        assert!(
            holders.iter().all(|h| *h == holders[0]),
            "k{k}: {holders:?}"
        );
    }
    support::close_and_clean(&[&clients[0], &clients[1], &clients[2], &late], &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_end_on_time_and_only_the_holder_releases() {
    let prefix = support::prefix();
    let Some(a) = backend(&prefix).await else {
        return;
    };
    let b = backend(&prefix).await.expect("a second client");
    let k = key("short");
    let hold = Duration::from_secs(2);
    assert!(a.try_claim(&k, hold).await.expect("a claim"));
    let taken = Instant::now();
    assert!(!b.try_claim(&k, hold).await.expect("a claim"));
    // Taken again by the other client once the hold ended, not before.
    loop {
        if b.try_claim(&k, hold).await.expect("a claim") {
            break;
        }
        assert!(taken.elapsed() < Duration::from_secs(10), "never freed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        taken.elapsed() >= Duration::from_millis(1900),
        "freed after {:?} of a 2 s hold",
        taken.elapsed()
    );

    let u = key("unique");
    assert_eq!(
        a.claim(&u, "t-a", Duration::from_secs(600)).await.unwrap(),
        ClaimOutcome::Won
    );
    assert_eq!(
        b.claim(&u, "t-b", Duration::from_secs(600)).await.unwrap(),
        ClaimOutcome::Held(Some("t-a".into()))
    );
    assert!(!b.release(&u, "t-b").await.unwrap(), "not b's to release");
    assert_eq!(b.holder(&u).await.unwrap().as_deref(), Some("t-a"));
    assert!(a.release(&u, "t-a").await.unwrap());
    assert_eq!(b.holder(&u).await.unwrap(), None);
    assert_eq!(
        b.claim(&u, "t-b", Duration::from_secs(600)).await.unwrap(),
        ClaimOutcome::Won
    );
    support::close_and_clean(&[&a, &b], &prefix).await;
}
