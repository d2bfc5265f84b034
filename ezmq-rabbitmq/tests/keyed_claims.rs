//! Keyed claims (`ExclusiveClaim::claim`, `holder`, `release`) against a
//! real broker (`EZMQ_TEST_AMQP_URL`), over several connections so that
//! readers and claimers of other processes compete for the same queues.

mod support;

use std::time::{Duration, Instant};

use ezmq_core::spi::{Backend, ClaimOutcome, ExclusiveClaim};
use ezmq_core::Topic;
use ezmq_rabbitmq::{RabbitBackend, RabbitConfig};

const HOLD: Duration = Duration::from_secs(60);

async fn backends(config: &RabbitConfig, n: usize) -> Vec<RabbitBackend> {
    let mut all = Vec::new();
    for _ in 0..n {
        all.push(RabbitBackend::connect(config.clone()).await.unwrap());
    }
    all
}

fn claims(b: &RabbitBackend) -> &dyn ExclusiveClaim {
    b.exclusive_claim()
        .expect("RabbitMQ offers exclusive claims")
}

fn key() -> Topic {
    Topic::new(support::topic("hold")).unwrap()
}

/// Closes the backends and deletes the keys' queues.
async fn finish(backends: Vec<RabbitBackend>, keys: &[&Topic]) {
    for b in backends {
        b.close().await.unwrap();
    }
    let queues: Vec<String> = keys
        .iter()
        .flat_map(|k| [format!("__ezmq|hold|{k}"), format!("__ezmq|holder|{k}")])
        .collect();
    support::cleanup(&queues, &[]).await;
}

#[tokio::test]
async fn one_of_twenty_concurrent_claims_wins_and_the_rest_learn_its_token() {
    let Some(config) = support::config().await else {
        return;
    };
    let backends = backends(&config, 4).await;
    let key = key();
    let outcomes = futures::future::join_all((0..20).map(|i| {
        let (b, key) = (&backends[i % 4], &key);
        async move {
            let token = format!("token-{i}");
            let outcome = claims(b).claim(key, &token, HOLD).await;
            (token, outcome)
        }
    }))
    .await;
    let won: Vec<&String> = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Ok(ClaimOutcome::Won)))
        .map(|(t, _)| t)
        .collect();
    assert_eq!(won.len(), 1, "{outcomes:?}");
    let winner = won[0].clone();
    for (token, outcome) in &outcomes {
        if *token != winner {
            assert_eq!(
                outcome.as_ref().ok(),
                Some(&ClaimOutcome::Held(Some(winner.clone()))),
                "{token}"
            );
        }
    }
    // The holder claiming again is told its own token.
    assert_eq!(
        claims(&backends[1])
            .claim(&key, &winner, HOLD)
            .await
            .unwrap(),
        ClaimOutcome::Held(Some(winner.clone()))
    );
    finish(backends, &[&key]).await;
}

#[tokio::test]
async fn holder_never_answers_none_while_polled_and_claimed_concurrently() {
    let Some(config) = support::config().await else {
        return;
    };
    let backends = backends(&config, 5).await;
    let key = key();
    assert_eq!(claims(&backends[0]).holder(&key).await.unwrap(), None);
    assert_eq!(
        claims(&backends[0])
            .claim(&key, "first", HOLD)
            .await
            .unwrap(),
        ClaimOutcome::Won
    );
    // 10 pollers on 5 connections, and claimers on every connection
    // meanwhile: the readers must not open the gate to them.
    let polls = futures::future::join_all((0..10).map(|i| {
        let (b, key) = (&backends[i % 5], &key);
        async move {
            let mut seen = Vec::new();
            for _ in 0..50 {
                seen.push(claims(b).holder(key).await.map_err(|e| e.to_string()));
            }
            seen
        }
    }));
    let rivals = futures::future::join_all((0..5).map(|i| {
        let (b, key) = (&backends[i], &key);
        async move {
            let mut seen = Vec::new();
            for round in 0..10 {
                let token = format!("rival-{i}-{round}");
                seen.push(claims(b).claim(key, &token, HOLD).await.unwrap());
            }
            seen
        }
    }));
    let (polls, rivals) = tokio::join!(polls, rivals);
    for seen in polls {
        for holder in seen {
            assert_eq!(holder, Ok(Some("first".to_owned())));
        }
    }
    for outcome in rivals.into_iter().flatten() {
        assert_eq!(outcome, ClaimOutcome::Held(Some("first".to_owned())));
    }
    finish(backends, &[&key]).await;
}

#[tokio::test]
async fn only_the_holders_token_releases() {
    let Some(config) = support::config().await else {
        return;
    };
    let backends = backends(&config, 2).await;
    let (a, b) = (claims(&backends[0]), claims(&backends[1]));
    let key = key();
    assert!(!a.release(&key, "nobody").await.unwrap());
    assert_eq!(
        a.claim(&key, "mine", HOLD).await.unwrap(),
        ClaimOutcome::Won
    );
    assert!(!b.release(&key, "yours").await.unwrap());
    assert_eq!(b.holder(&key).await.unwrap().as_deref(), Some("mine"));
    assert_eq!(
        b.claim(&key, "yours", HOLD).await.unwrap(),
        ClaimOutcome::Held(Some("mine".to_owned()))
    );
    assert!(b.release(&key, "mine").await.unwrap());
    assert_eq!(a.holder(&key).await.unwrap(), None);
    assert!(!a.release(&key, "mine").await.unwrap());
    // Free for the next one (its queues were deleted and come back).
    assert_eq!(
        b.claim(&key, "yours", HOLD).await.unwrap(),
        ClaimOutcome::Won
    );
    assert_eq!(a.holder(&key).await.unwrap().as_deref(), Some("yours"));
    assert!(a.release(&key, "yours").await.unwrap());
    finish(backends, &[&key]).await;
}

#[tokio::test]
async fn a_claim_ends_with_its_hold() {
    let Some(config) = support::config().await else {
        return;
    };
    let backends = backends(&config, 2).await;
    let (a, b) = (claims(&backends[0]), claims(&backends[1]));
    let key = key();
    let hold = Duration::from_secs(2);
    assert_eq!(
        a.claim(&key, "short", hold).await.unwrap(),
        ClaimOutcome::Won
    );
    // Attempts do not extend it.
    assert_eq!(
        b.claim(&key, "late", hold).await.unwrap(),
        ClaimOutcome::Held(Some("short".to_owned()))
    );
    let started = Instant::now();
    loop {
        match b.holder(&key).await.unwrap() {
            None => break,
            Some(holder) => assert_eq!(holder, "short"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "still held long after its 2 s hold"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        b.claim(&key, "late", hold).await.unwrap(),
        ClaimOutcome::Won
    );
    assert!(b.release(&key, "late").await.unwrap());
    finish(backends, &[&key]).await;
}
