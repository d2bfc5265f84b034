//! Delays on a real broker: never early at a high rate, and the first
//! delayed pushes of a connection sharing one declaration of the levels.

mod support;

use std::time::{Duration, Instant};

use ezmq_core::spi::Backend;
use ezmq_core::PushOptions;
use support::{src, OwnLevels};

/// `push_delay(500 ms)` at a high rate: none arrives before its delay
/// (each level may end a hop up to 1 ms early; 500 ms passes six).
#[tokio::test]
async fn delays_at_a_high_rate_are_never_early() {
    let Some(config) = support::config().await else {
        return;
    };
    let own = OwnLevels::connect(config, "never-early").await;
    let (backend, topic, t) = (&own.backend, &own.topic, &own.t);
    let delay = Duration::from_millis(500);
    // Declares the levels before the timed pushes.
    backend
        .publish(t, "warm-up".into(), &PushOptions::new().with_delay(delay))
        .await
        .unwrap();
    // 500 pushes a second (as a producer would), not a burst: a backlog
    // in the levels would make every delay late and hide the early ones.
    let base = tokio::time::Instant::now();
    let pushes = (0..1000u32).map(|i| {
        let (backend, t) = (backend.clone(), t.clone());
        async move {
            tokio::time::sleep_until(base + Duration::from_millis(2 * u64::from(i))).await;
            let started = Instant::now();
            let opts = PushOptions::new().with_delay(delay);
            backend
                .publish(&t, i.to_string().into(), &opts)
                .await
                .unwrap();
            (i.to_string(), started)
        }
    });
    let receiving = {
        let backend = backend.clone();
        let source = src(topic);
        tokio::spawn(async move {
            let mut arrived = std::collections::HashMap::new();
            let end = Instant::now() + Duration::from_secs(60);
            while arrived.len() < 1001 && Instant::now() < end {
                for d in backend
                    .receive(&source, 200, Duration::from_secs(1))
                    .await
                    .unwrap()
                {
                    let body = String::from_utf8(d.job.body().to_vec()).unwrap();
                    arrived.entry(body).or_insert_with(Instant::now);
                    d.handle.ack().await.unwrap();
                }
            }
            arrived
        })
    };
    let started = futures::future::join_all(pushes).await;
    let arrived = receiving.await.unwrap();
    let mut early = Vec::new();
    let mut lateness = Vec::new();
    for (body, start) in &started {
        let at = arrived
            .get(body)
            .unwrap_or_else(|| panic!("{body} never arrived"));
        let waited = at.duration_since(*start);
        if waited < delay {
            early.push(delay - waited);
        } else {
            lateness.push(waited - delay);
        }
    }
    lateness.sort();
    println!(
        "500 ms delays: {} early (most {:?}); lateness p50 {:?}, max {:?}",
        early.len(),
        early.iter().max(),
        lateness.get(lateness.len() / 2),
        lateness.last()
    );
    own.close().await;
    assert!(early.is_empty(), "{} delays ended early", early.len());
}

/// 200 concurrent first delayed pushes on a fresh topology (a queue prefix
/// of their own: no delay level declared yet) share one declaration of
/// the delay levels and all finish within 2 s.
#[tokio::test]
async fn concurrent_first_delayed_pushes_share_one_declaration() {
    let Some(config) = support::config().await else {
        return;
    };
    let own = OwnLevels::connect(config, "first-delayed").await;
    let (backend, t) = (&own.backend, &own.t);
    let started = Instant::now();
    let pushes = (0..200u32).map(|i| {
        let (backend, t) = (backend.clone(), t.clone());
        async move {
            let opts = PushOptions::new().with_delay(Duration::from_secs(30));
            backend
                .publish(&t, i.to_string().into(), &opts)
                .await
                .unwrap();
            started.elapsed()
        }
    });
    let mut took = futures::future::join_all(pushes).await;
    let all = started.elapsed();
    took.sort();
    println!(
        "200 concurrent first delayed pushes: all done in {all:?}; p50 {:?}, p99 {:?}",
        took[took.len() / 2],
        took[took.len() * 99 / 100]
    );
    own.close().await;
    assert!(all < Duration::from_secs(2), "took {all:?}");
}
