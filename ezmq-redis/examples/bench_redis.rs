//! SDK vs raw `redis` crate on the same Redis, in one run:
//! push (XADD), consume (XREADGROUP + XACK/XDEL), and p99 push->handler
//! latency at 1k msg/s.
//!
//! ```sh
//! cargo run --release -p ezmq-redis --example bench_redis [-- redis://127.0.0.1:6379 20000]
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ezmq_core::{ConsumeOptions, Job, MqClient, MqClientExt};
use futures::stream::{self, StreamExt};
use redis::aio::MultiplexedConnection;
use redis::Value;

const CONCURRENCY: usize = 64;

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0)
}

fn topic(name: &str) -> String {
    format!("bench.{name}.{}", uuid::Uuid::new_v4().simple())
}

async fn raw_push(conn: &MultiplexedConnection, stream: &str, n: usize) -> Duration {
    let start = Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(CONCURRENCY, |_| {
            let mut conn = conn.clone();
            async move {
                let _: String = redis::cmd("XADD")
                    .arg(stream)
                    .arg("*")
                    .arg("body")
                    .arg("payload-0123456789")
                    .query_async(&mut conn)
                    .await
                    .expect("XADD");
            }
        })
        .await;
    start.elapsed()
}

async fn sdk_push(client: &ezmq_core::Client, topic: &str, n: usize) -> Duration {
    let start = Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(CONCURRENCY, |_| async move {
            client
                .push(topic, "payload-0123456789".into())
                .await
                .expect("push");
        })
        .await;
    start.elapsed()
}

async fn raw_consume(conn: &MultiplexedConnection, stream: &str, n: usize) -> Duration {
    let mut conn = conn.clone();
    let _: Value = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg("g")
        .arg("0")
        .arg("MKSTREAM")
        .query_async(&mut conn)
        .await
        .unwrap_or(Value::Nil);
    let start = Instant::now();
    let mut done = 0;
    while done < n {
        let reply: redis::streams::StreamReadReply = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("g")
            .arg("c")
            .arg("COUNT")
            .arg(CONCURRENCY)
            .arg("BLOCK")
            .arg(100)
            .arg("STREAMS")
            .arg(stream)
            .arg(">")
            .query_async(&mut conn)
            .await
            .expect("XREADGROUP");
        let ids: Vec<String> = reply
            .keys
            .into_iter()
            .flat_map(|k| k.ids.into_iter().map(|e| e.id))
            .collect();
        if ids.is_empty() {
            continue;
        }
        done += ids.len();
        let mut pipe = redis::pipe();
        pipe.cmd("XACK").arg(stream).arg("g").arg(&ids).ignore();
        pipe.cmd("XDEL").arg(stream).arg(&ids).ignore();
        let () = pipe.query_async(&mut conn).await.expect("XACK");
    }
    start.elapsed()
}

async fn sdk_consume(client: &ezmq_core::Client, topic: &str, n: usize) -> Duration {
    let count = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(tokio::sync::Notify::new());
    let start = Instant::now();
    let (c, d) = (Arc::clone(&count), Arc::clone(&done));
    let listener = client
        .add_consume_listener_with(
            topic,
            ConsumeOptions::new().with_concurrency(CONCURRENCY),
            move |_job: Job| {
                let (c, d) = (Arc::clone(&c), Arc::clone(&d));
                async move {
                    if c.fetch_add(1, Ordering::Relaxed) + 1 == n {
                        d.notify_one();
                    }
                    Ok::<(), std::io::Error>(())
                }
            },
        )
        .await
        .expect("listener");
    done.notified().await;
    let elapsed = start.elapsed();
    listener.stop(Duration::from_secs(5)).await;
    elapsed
}

async fn latency(client: &ezmq_core::Client, topic: &str, seconds: u64) -> (u128, u128, usize) {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&samples);
    let _listener = client
        .add_consume_listener(topic, move |job: Job| {
            let s = Arc::clone(&s);
            async move {
                let sent: u128 = std::str::from_utf8(job.body())
                    .ok()
                    .and_then(|b| b.parse().ok())
                    .unwrap_or(0);
                if let Ok(mut v) = s.lock() {
                    v.push(now_us().saturating_sub(sent));
                }
                Ok::<(), std::io::Error>(())
            }
        })
        .await
        .expect("listener");
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    for _ in 0..seconds * 1000 {
        tick.tick().await;
        client
            .push(topic, now_us().to_string().into())
            .await
            .expect("push");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut v = samples.lock().map(|v| v.clone()).unwrap_or_default();
    v.sort_unstable();
    let pick = |q: f64| {
        v.get(((v.len() as f64 * q) as usize).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    (pick(0.5), pick(0.99), v.len())
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let raw = redis::Client::open(url.as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let client = ezmq_redis::connect_url(&url).await.expect("connect");

    let raw_stream = topic("raw");
    let sdk_topic = topic("sdk");
    let raw_t = raw_push(&raw, &raw_stream, n).await;
    let sdk_t = sdk_push(&client, &sdk_topic, n).await;
    let rate = |t: Duration| n as f64 / t.as_secs_f64();
    println!(
        "push    raw {:>9.0}/s  sdk {:>9.0}/s  sdk/raw {:.0}%",
        rate(raw_t),
        rate(sdk_t),
        100.0 * raw_t.as_secs_f64() / sdk_t.as_secs_f64()
    );
    let raw_c = raw_consume(&raw, &raw_stream, n).await;
    let sdk_c = sdk_consume(&client, &sdk_topic, n).await;
    println!(
        "consume raw {:>9.0}/s  sdk {:>9.0}/s  sdk/raw {:.0}%",
        rate(raw_c),
        rate(sdk_c),
        100.0 * raw_c.as_secs_f64() / sdk_c.as_secs_f64()
    );
    let (p50, p99, count) = latency(&client, &topic("lat"), 3).await;
    println!("push->handler at 1k msg/s: p50 {p50} us, p99 {p99} us ({count} samples)");
    let mut conn = raw.clone();
    let _: Value = redis::cmd("DEL")
        .arg(&raw_stream)
        .query_async(&mut conn)
        .await
        .unwrap_or(Value::Nil);
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
