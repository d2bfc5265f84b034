//! Request-reply round-trip latency: sequential and concurrent requests from
//! one caller client to one worker client, with p50/p99.
//!
//! Starts an embedded Disque server unless `--addrs` names running nodes.
//!
//! ```text
//! cargo run --release -p ezmq-request-reply --example request_reply_latency
//! cargo run --release -p ezmq-request-reply --example request_reply_latency -- \
//!     --addrs 127.0.0.1:7711 --sequential 5000 --concurrency 64 --concurrent 20000
//! ```

use std::time::{Duration, Instant};

use clap::Parser;
use ezmq_disque::{ConsumeOptions, DisqueClient, DisqueConfig, MqClient};
use ezmq_disque_server::{EmbeddedDisque, ServerConfig};
use ezmq_request_reply::{Request, RequestReplyExt};

#[derive(Debug, Parser)]
#[command(about = "Measures ezmq request-reply round trips")]
struct Args {
    /// Disque nodes (`host:port,host:port`); an embedded server when absent.
    #[arg(long, value_delimiter = ',')]
    addrs: Vec<String>,
    /// Sequential round trips.
    #[arg(long, default_value_t = 2000)]
    sequential: usize,
    /// Callers running at once in the concurrent phase.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Round trips of the concurrent phase, all callers together.
    #[arg(long, default_value_t = 10_000)]
    concurrent: usize,
    /// Request body size in bytes.
    #[arg(long, default_value_t = 64)]
    body_size: usize,
    /// Handlers the worker runs at once.
    #[arg(long, default_value_t = 64)]
    worker_concurrency: usize,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let args = Args::parse();

    let (_server, addrs) = if args.addrs.is_empty() {
        let server = EmbeddedDisque::start(ServerConfig::default().with_port(0)).await?;
        let addr = server.addr().to_string();
        println!("embedded Disque on {addr}");
        (Some(server), vec![addr])
    } else {
        (None, args.addrs.clone())
    };
    let connect = || ezmq_disque::connect(DisqueConfig::default().with_seeds(addrs.clone()));
    let worker: DisqueClient = connect().await?;
    let caller: DisqueClient = connect().await?;
    let topic = format!("bench.rr.{}", std::process::id());

    worker
        .add_reply_listener_with(
            &topic,
            ConsumeOptions::new().with_concurrency(args.worker_concurrency),
            |req: Request| async move { Ok::<_, std::io::Error>(req.into_body()) },
        )
        .await?;

    let body = bytes::Bytes::from(vec![b'x'; args.body_size]);
    let timeout = Duration::from_secs(10);

    // Warm-up: connections, the reply receiver, the allocator.
    for _ in 0..200 {
        caller.request(&topic, body.clone(), timeout).await?;
    }

    let mut samples = Vec::with_capacity(args.sequential);
    let started = Instant::now();
    for _ in 0..args.sequential {
        let t = Instant::now();
        caller.request(&topic, body.clone(), timeout).await?;
        samples.push(t.elapsed());
    }
    report("sequential", &mut samples, started.elapsed());

    let per_task = args.concurrent.div_ceil(args.concurrency.max(1));
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.concurrency.max(1))
        .map(|_| {
            let caller = caller.clone();
            let topic = topic.clone();
            let body = body.clone();
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(per_task);
                for _ in 0..per_task {
                    let t = Instant::now();
                    caller.request(&topic, body.clone(), timeout).await?;
                    samples.push(t.elapsed());
                }
                Ok::<_, ezmq_disque::Error>(samples)
            })
        })
        .collect();
    let mut samples = Vec::with_capacity(per_task * args.concurrency);
    for task in tasks {
        samples.extend(task.await??);
    }
    let label = format!("concurrent ({} callers)", args.concurrency);
    report(&label, &mut samples, started.elapsed());

    caller.shutdown(Duration::from_secs(2)).await?;
    worker.shutdown(Duration::from_secs(2)).await?;
    Ok(())
}

fn report(label: &str, samples: &mut [Duration], wall: Duration) {
    if samples.is_empty() {
        return;
    }
    samples.sort_unstable();
    let pick = |q: f64| {
        let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[i]
    };
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label}: n={} p50={:.3}ms p90={:.3}ms p99={:.3}ms max={:.3}ms throughput={:.0} req/s",
        samples.len(),
        ms(pick(0.50)),
        ms(pick(0.90)),
        ms(pick(0.99)),
        ms(samples[samples.len() - 1]),
        samples.len() as f64 / wall.as_secs_f64(),
    );
}
