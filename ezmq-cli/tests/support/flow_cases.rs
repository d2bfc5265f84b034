//! `stats` and flow control: the limits a topic's listeners publish.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ezmq::prelude::*;
use ezmq::{ConsumeOptions, Job, PushOptions};
use ezmq_test_support::eventually;

use super::cases::stats;
use super::{ezmq, topic};

/// A listener with a rate limit and a global concurrency limit publishes
/// them: `stats` shows `limits` (`LIMITS` in the table), and `held_back`
/// while its backlog waits for tokens.
pub async fn stats_show_limits(url: &str) {
    let t = topic("flow");
    let client = ezmq::connect_url(url).await.expect("connect");
    let jobs = (0..20)
        .map(|n| (format!("job-{n}").into(), PushOptions::new()))
        .collect();
    for pushed in client.push_batch(&t, jobs).await.expect("backlog") {
        pushed.expect("backlog job");
    }
    let before = stats(url, &t).await;
    assert_eq!(before["limits"], serde_json::Value::Null, "{before}");
    let options = ConsumeOptions::new()
        .with_rate_limit(2, Duration::from_secs(1))
        .with_global_concurrency(3);
    let listener = client
        .add_consume_listener_with(&t, options, |_job: Job| async {
            Ok::<(), std::io::Error>(())
        })
        .await
        .expect("a limited listener");
    let last = Arc::new(Mutex::new(serde_json::Value::Null));
    let shown = eventually(Duration::from_secs(30), || {
        let (url, t, last) = (url.to_owned(), t.clone(), Arc::clone(&last));
        async move {
            let s = stats(&url, &t).await;
            let held = s["limits"] == "2/1s burst 1, 3 at once" && s["held_back"] == true;
            *last.lock().expect("last stats") = s;
            held
        }
    })
    .await;
    let last = last.lock().expect("last stats").clone();
    assert!(shown, "stats never showed the limits held back: {last}");
    let table = ezmq(url, &["stats", &t]).await.ok().stdout;
    assert!(
        table.contains("LIMITS") && table.contains("2/1s burst 1, 3 at once"),
        "{table}"
    );
    listener.stop(Duration::from_secs(5)).await;
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
