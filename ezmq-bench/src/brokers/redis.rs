//! Redis: raw `redis`-crate `XADD` / `XREADGROUP` + `XACK` loops against
//! `ezmq-redis`.

mod batch;
mod dashboard;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ezmq_core::Client;
use redis::aio::MultiplexedConnection;
use redis::Value;
use tokio::task::{JoinHandle, JoinSet};

use crate::brokers::{RawBroker, RawNotes, Sender};
use crate::scenario::latency::Recorder;
use crate::BoxResult;

/// The default URL (`EZMQ_TEST_REDIS_URL` overrides it).
pub(crate) const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
/// The raw side's consumer group.
const GROUP: &str = "raw";
/// `XREADGROUP ... BLOCK` of the raw loops (ezmq's `block_wait` default).
const BLOCK_MS: u64 = 100;

/// A Redis server and the raw connection to it.
pub(crate) struct RedisBench {
    url: String,
    client: redis::Client,
    mux: MultiplexedConnection,
}

impl RedisBench {
    /// Connects (and pings) `url`.
    pub(crate) async fn connect(url: &str) -> BoxResult<Self> {
        let client = redis::Client::open(url)?;
        let mut mux = tokio::time::timeout(
            Duration::from_secs(2),
            client.get_multiplexed_async_connection(),
        )
        .await
        .map_err(|_| format!("no answer from {url}"))??;
        let _: String = redis::cmd("PING").query_async(&mut mux).await?;
        Ok(RedisBench {
            url: url.to_owned(),
            client,
            mux,
        })
    }

    /// A dedicated connection for blocking reads.
    async fn dedicated(&self) -> BoxResult<MultiplexedConnection> {
        Ok(self.client.get_multiplexed_async_connection().await?)
    }

    /// The group for the raw loop on `stream`, from its start.
    async fn create_group(&self, stream: &str) -> BoxResult<()> {
        let created: redis::RedisResult<Value> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(stream)
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut self.mux.clone())
            .await;
        match created {
            Err(e) if e.code() != Some("BUSYGROUP") => Err(e.into()),
            _ => Ok(()),
        }
    }
}

/// The stream ezmq uses for topic `queue` (`<prefix>:{<topic>}:s`); the
/// raw side uses the same key so a raw prefill reaches ezmq's listener.
fn stream_key(queue: &str) -> String {
    format!("ezmq:{{{queue}}}:s")
}

/// `XREADGROUP GROUP raw c COUNT k BLOCK 100 STREAMS s >`: the entry ids
/// and their `body` fields.
async fn read(
    conn: &mut MultiplexedConnection,
    stream: &str,
    k: usize,
) -> BoxResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let reply: Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(GROUP)
        .arg("c")
        .arg("COUNT")
        .arg(k)
        .arg("BLOCK")
        .arg(BLOCK_MS)
        .arg("STREAMS")
        .arg(stream)
        .arg(">")
        .query_async(conn)
        .await?;
    let entries = match reply {
        Value::Array(streams) => streams.into_iter().next().and_then(|s| match s {
            Value::Array(mut pair) if pair.len() == 2 => Some(pair.swap_remove(1)),
            _ => None,
        }),
        Value::Map(streams) => streams.into_iter().next().map(|(_, v)| v),
        _ => None,
    };
    let Some(Value::Array(entries)) = entries else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(mut parts) = entry else {
            continue;
        };
        if parts.len() < 2 {
            continue;
        }
        let fields = parts.swap_remove(1);
        let Value::BulkString(id) = parts.swap_remove(0) else {
            continue;
        };
        let mut body = Vec::new();
        if let Value::Array(fields) = fields {
            let mut it = fields.into_iter();
            while let (Some(name), Some(value)) = (it.next(), it.next()) {
                if matches!(&name, Value::BulkString(n) if n == b"body") {
                    if let Value::BulkString(b) = value {
                        body = b;
                    }
                }
            }
        }
        out.push((id, body));
    }
    Ok(out)
}

/// `XACK` + `XDEL` of `ids`, pipelined (what ezmq sends for a queue).
async fn ack(conn: &mut MultiplexedConnection, stream: &str, ids: &[Vec<u8>]) -> BoxResult<()> {
    let mut pipe = redis::pipe();
    pipe.cmd("XACK").arg(stream).arg(GROUP);
    for id in ids {
        pipe.arg(id);
    }
    pipe.ignore().cmd("XDEL").arg(stream);
    for id in ids {
        pipe.arg(id);
    }
    pipe.ignore();
    let () = pipe.query_async(conn).await?;
    Ok(())
}

impl RawBroker for RedisBench {
    fn name(&self) -> &'static str {
        "Redis"
    }

    fn p99_goal(&self) -> Duration {
        Duration::from_millis(2)
    }

    fn raw_notes(&self) -> RawNotes {
        RawNotes {
            push_col: "raw XADD",
            consume_col: "raw XREADGROUP+XACK loop",
            push: "one multiplexed `redis` connection shared by the tasks, \
                   `XADD s * body <12 B>` (the command ezmq sends for a default push).",
            consume: "one loop, `XREADGROUP GROUP raw c COUNT 64 BLOCK 100 STREAMS s >` on a \
                      dedicated connection, then `XACK` + `XDEL` of the batch pipelined on a \
                      multiplexed connection and awaited, then the next read; timed until the \
                      last ack.",
            latency: "one `XREADGROUP ... COUNT 64 BLOCK 100` loop on a dedicated connection, \
                      latency taken when the read returns, `XACK` + `XDEL` pipelined in the \
                      background.",
        }
    }

    async fn ezmq(&self) -> BoxResult<Client> {
        Ok(ezmq_redis::connect_url(&self.url).await?)
    }

    async fn raw_sender(&self, queue: &str) -> BoxResult<Sender> {
        let (mux, stream) = (self.mux.clone(), stream_key(queue));
        Ok(Arc::new(move |body| {
            let (mut conn, stream) = (mux.clone(), stream.clone());
            Box::pin(async move {
                let _: Value = redis::cmd("XADD")
                    .arg(&stream)
                    .arg("*")
                    .arg("body")
                    .arg(body.as_ref())
                    .query_async(&mut conn)
                    .await?;
                Ok(())
            })
        }))
    }

    async fn raw_consume(&self, queue: &str, n: u64, k: usize) -> BoxResult<Duration> {
        let stream = stream_key(queue);
        self.create_group(&stream).await?;
        let mut get = self.dedicated().await?;
        let mut acks = self.mux.clone();
        let start = Instant::now();
        let mut got = 0u64;
        while got < n {
            if start.elapsed() > super::DRAIN_LIMIT {
                return Err(
                    format!("raw consume: only {got} of {n} in {:?}", super::DRAIN_LIMIT).into(),
                );
            }
            let entries = read(&mut get, &stream, k).await?;
            if entries.is_empty() {
                continue;
            }
            let ids: Vec<Vec<u8>> = entries.into_iter().map(|(id, _)| id).collect();
            ack(&mut acks, &stream, &ids).await?;
            got += ids.len() as u64;
        }
        Ok(start.elapsed())
    }

    async fn raw_receiver(
        &self,
        queue: &str,
        k: usize,
        rec: Arc<Recorder>,
        stop: Arc<AtomicBool>,
    ) -> BoxResult<JoinHandle<BoxResult<()>>> {
        let stream = stream_key(queue);
        self.create_group(&stream).await?;
        let mut get = self.dedicated().await?;
        let mux = self.mux.clone();
        Ok(tokio::spawn(async move {
            let mut acks: JoinSet<BoxResult<()>> = JoinSet::new();
            while !stop.load(Ordering::Relaxed) {
                let entries = read(&mut get, &stream, k).await?;
                if entries.is_empty() {
                    continue;
                }
                let mut ids = Vec::with_capacity(entries.len());
                for (id, body) in entries {
                    rec.record(&body);
                    ids.push(id);
                }
                let (mut conn, stream) = (mux.clone(), stream.clone());
                acks.spawn(async move { ack(&mut conn, &stream, &ids).await });
                while let Some(done) = acks.try_join_next() {
                    done??;
                }
            }
            while let Some(done) = acks.join_next().await {
                done??;
            }
            Ok(())
        }))
    }

    async fn cleanup(&self, queue: &str) -> BoxResult<()> {
        let _: Value = redis::cmd("DEL")
            .arg(stream_key(queue))
            .arg(format!("ezmq:{{{queue}}}:d"))
            .query_async(&mut self.mux.clone())
            .await?;
        Ok(())
    }
}
