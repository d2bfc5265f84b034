//! GETJOB + ACKJOB load generator.
//!
//! ```sh
//! cargo run --release -p ezmq-disque-server --example bench -- [ADDR] [CLIENTS] [JOBS]
//! ```
//!
//! Without ADDR an embedded server is started in-process. The queue is
//! pre-filled with JOBS jobs (pipelined ADDJOB), then CLIENTS connections
//! loop on `GETJOB NOHANG FROM q` + `ACKJOB id` until the queue is empty.

use ezmq_disque_server::{EmbeddedDisque, ServerConfig};
use redis::Value;
use std::time::Instant;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut embedded = None;
    let addr = match args.first().filter(|a| a.as_str() != "-") {
        Some(a) => a.clone(),
        None => {
            let s = EmbeddedDisque::start(ServerConfig::default().with_port(0)).await?;
            let a = s.addr().to_string();
            embedded = Some(s);
            a
        }
    };
    let clients: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(50);
    let jobs: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let client = redis::Client::open(format!("redis://{addr}/"))?;
    let queue = format!("bench-{}", std::process::id());

    // Fill the queue with pipelined ADDJOBs.
    let mut con = client.get_multiplexed_async_connection().await?;
    let t0 = Instant::now();
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(1000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("ADDJOB")
                .arg(&queue)
                .arg(format!("job-{i}"))
                .arg(0)
                .ignore();
        }
        pipe.query_async::<()>(&mut con).await?;
    }
    let fill = t0.elapsed();
    println!(
        "ADDJOB (pipelined x1000, 1 client): {jobs} jobs in {:.2?} = {:.0} ops/s",
        fill,
        jobs as f64 / fill.as_secs_f64()
    );

    // Consume with GETJOB NOHANG + ACKJOB from many clients.
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let mut con = client.get_multiplexed_async_connection().await?;
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = 0usize;
            loop {
                let v: Value = redis::cmd("GETJOB")
                    .arg("NOHANG")
                    .arg("FROM")
                    .arg(&queue)
                    .query_async(&mut con)
                    .await?;
                let id = match v {
                    Value::Array(mut items) if !items.is_empty() => match items.swap_remove(0) {
                        Value::Array(mut e) if e.len() >= 2 => match e.swap_remove(1) {
                            Value::BulkString(id) => id,
                            _ => break,
                        },
                        _ => break,
                    },
                    _ => break,
                };
                let _: i64 = redis::cmd("ACKJOB").arg(id).query_async(&mut con).await?;
                done += 1;
            }
            Ok::<usize, redis::RedisError>(done)
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    let el = t0.elapsed();
    println!(
        "GETJOB+ACKJOB ({clients} clients): {total} jobs in {:.2?} = {:.0} jobs/s ({:.0} commands/s)",
        el,
        total as f64 / el.as_secs_f64(),
        2.0 * total as f64 / el.as_secs_f64()
    );
    if let Some(s) = embedded {
        s.shutdown().await;
    }
    Ok(())
}
