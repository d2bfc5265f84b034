//! The raw baseline: Disque commands sent with the `redis` crate, no ezmq.

use futures::future::join_all;
use redis::aio::MultiplexedConnection;
use redis::Value;

use crate::target::JOB_TTL;
use crate::BoxResult;

/// `ADDJOB` replication timeout, the same as ezmq's default
/// (`DisqueConfig::default_add_timeout`, 5 s).
const ADD_TIMEOUT_MS: u64 = 5_000;
/// `RETRY`, the same as ezmq's default (`DisqueConfig::default_retry`).
const RETRY_SECS: u64 = 30;

/// The `ADDJOB` ezmq sends for a default push on a single node:
/// `ADDJOB q body 5000 REPLICATE 1 RETRY 30 TTL <JOB_TTL>`.
pub(crate) fn addjob(queue: &str, body: &[u8]) -> redis::Cmd {
    let mut cmd = redis::cmd("ADDJOB");
    cmd.arg(queue)
        .arg(body)
        .arg(ADD_TIMEOUT_MS)
        .arg("REPLICATE")
        .arg(1)
        .arg("RETRY")
        .arg(RETRY_SECS)
        .arg("TTL")
        .arg(JOB_TTL.as_secs());
    cmd
}

/// An at-most-once `ADDJOB` (`RETRY 0`) with a short TTL, as a request or a
/// reply of request-reply.
pub(crate) fn addjob_once(queue: &str, body: &[u8], ttl_secs: u64) -> redis::Cmd {
    let mut cmd = redis::cmd("ADDJOB");
    cmd.arg(queue)
        .arg(body)
        .arg(ADD_TIMEOUT_MS)
        .arg("REPLICATE")
        .arg(1)
        .arg("RETRY")
        .arg(0)
        .arg("TTL")
        .arg(ttl_secs);
    cmd
}

/// Pushes one job.
pub(crate) async fn push(
    conn: &mut MultiplexedConnection,
    queue: &str,
    body: &[u8],
) -> BoxResult<()> {
    addjob(queue, body).query_async::<Value>(conn).await?;
    Ok(())
}

/// A job as returned by `GETJOB`: id and body.
#[derive(Debug)]
pub(crate) struct RawJob {
    /// Job id.
    pub(crate) id: String,
    /// Body.
    pub(crate) body: Vec<u8>,
}

/// `GETJOB TIMEOUT <ms> COUNT <count> FROM <queue>` (or `NOHANG` when
/// `timeout_ms` is 0).
pub(crate) async fn getjob(
    conn: &mut MultiplexedConnection,
    queue: &str,
    count: usize,
    timeout_ms: u64,
) -> BoxResult<Vec<RawJob>> {
    let mut cmd = redis::cmd("GETJOB");
    if timeout_ms == 0 {
        cmd.arg("NOHANG");
    } else {
        cmd.arg("TIMEOUT").arg(timeout_ms);
    }
    cmd.arg("COUNT").arg(count).arg("FROM").arg(queue);
    let value: Value = cmd.query_async(conn).await?;
    let Value::Array(items) = value else {
        return Ok(Vec::new());
    };
    let mut jobs = Vec::with_capacity(items.len());
    for item in items {
        let Value::Array(fields) = item else {
            return Err("malformed GETJOB reply".into());
        };
        let mut fields = fields.into_iter().skip(1);
        let (Some(Value::BulkString(id)), Some(Value::BulkString(body))) =
            (fields.next(), fields.next())
        else {
            return Err("malformed GETJOB job".into());
        };
        jobs.push(RawJob {
            id: String::from_utf8(id)?,
            body,
        });
    }
    Ok(jobs)
}

/// `ACKJOB id`, one command per job, pipelined on the multiplexed
/// connection (what ezmq does).
pub(crate) async fn ack_each(conn: &MultiplexedConnection, ids: &[String]) -> BoxResult<()> {
    let acks = ids.iter().map(|id| {
        let mut conn = conn.clone();
        async move {
            redis::cmd("ACKJOB")
                .arg(id)
                .query_async::<Value>(&mut conn)
                .await
        }
    });
    for result in join_all(acks).await {
        result?;
    }
    Ok(())
}

/// Deletes every job waiting in `queue` (`GETJOB NOHANG` + `DELJOB` in
/// batches), so that finished scenarios do not leave jobs in the server.
pub(crate) async fn drain(conn: &mut MultiplexedConnection, queue: &str) -> BoxResult<u64> {
    let mut deleted = 0u64;
    loop {
        let jobs = getjob(conn, queue, 5_000, 0).await?;
        if jobs.is_empty() {
            return Ok(deleted);
        }
        let mut cmd = redis::cmd("DELJOB");
        for job in &jobs {
            cmd.arg(&job.id);
        }
        cmd.query_async::<Value>(conn).await?;
        deleted += jobs.len() as u64;
    }
}
