//! The Disque commands a [`DisqueBackend`] sends (`ADDJOB`, `GETJOB`,
//! `ACKJOB`, `NACK`, `ENQUEUE`, `WORKING`, `QLEN`, `QPEEK`), each routed
//! and failed over by the node table in [`crate::backend`], and the parsing
//! of their replies. The SPI implementation ([`crate::spi_impl`]) and the
//! fan-out and reply modules are built from them.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ezmq_core::{Error, Job, JobId, PushOptions, Result, Topic};
use redis::Value;

use crate::addjob::addjob_cmd;
use crate::backend::{affinity_order, DisqueBackend};
use crate::error::DisqueError;
use crate::node::{as_string, as_u64, Node};

/// One `ADDJOB` on `node`; an error after it was sent becomes
/// [`DisqueError::OutcomeUnknown`], which is never failed over.
async fn addjob_on(
    node: &Node,
    cmd: &redis::Cmd,
    timeout: Duration,
) -> Result<String, DisqueError> {
    let value = node.query("ADDJOB", cmd, timeout).await.map_err(|e| {
        if e.may_have_run() {
            DisqueError::OutcomeUnknown(Box::new(e))
        } else {
            e
        }
    })?;
    into_string(value).map_err(|value| unexpected("ADDJOB", node, &value))
}

/// Like [`as_string`], taking the reply (no copy of a bulk string); gives
/// the value back when it is not a string.
pub(crate) fn into_string(value: Value) -> std::result::Result<String, Value> {
    match value {
        Value::BulkString(b) => String::from_utf8(b).map_err(|e| Value::BulkString(e.into_bytes())),
        Value::SimpleString(s) => Ok(s),
        Value::Okay => Ok("OK".to_owned()),
        Value::Int(i) => Ok(i.to_string()),
        other => Err(other),
    }
}

pub(crate) fn abbreviate(value: &Value) -> String {
    let mut s = format!("{value:?}");
    if s.len() > 200 {
        let mut cut = 200;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

pub(crate) fn unexpected(command: &'static str, node: &Node, value: &Value) -> DisqueError {
    DisqueError::UnexpectedReply {
        command,
        addr: node.addr().to_owned(),
        reply: abbreviate(value),
    }
}

fn as_bytes(v: &Value) -> Option<Bytes> {
    match v {
        Value::BulkString(b) => Some(Bytes::copy_from_slice(b)),
        Value::SimpleString(s) => Some(Bytes::copy_from_slice(s.as_bytes())),
        _ => None,
    }
}

/// Parses one `[queue, id, body, ("nacks", n, "additional-deliveries", n)?]`.
fn parse_job(v: &Value) -> Option<Job> {
    let Value::Array(f) = v else { return None };
    let queue = as_string(f.first()?)?;
    let id = as_string(f.get(1)?)?;
    let body = as_bytes(f.get(2)?)?;
    let mut nacks = 0u32;
    let mut extra = 0u32;
    let mut rest = f.iter().skip(3);
    while let (Some(k), Some(val)) = (rest.next(), rest.next()) {
        let n = as_u64(val).and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
        match as_string(k).as_deref() {
            Some("nacks") => nacks = n,
            Some("additional-deliveries") => extra = n,
            _ => {}
        }
    }
    let attempt = 1u32.saturating_add(nacks).saturating_add(extra);
    Some(Job::new(JobId::new(id), Topic::from_broker(queue), body).with_attempt(attempt))
}

fn parse_jobs(command: &'static str, node: &Node, value: &Value) -> Result<Vec<Job>, DisqueError> {
    match value {
        Value::Nil => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|item| parse_job(item).ok_or_else(|| unexpected(command, node, value)))
            .collect(),
        other => Err(unexpected(command, node, other)),
    }
}

/// The error of a cluster-wide read that missed a node.
fn partial(err: DisqueError) -> Error {
    Error::backend(DisqueError::Partial(Box::new(err)), true)
}

pub(crate) fn map_add_error(topic: &Topic, err: DisqueError) -> Error {
    if let DisqueError::OutcomeUnknown(sent) = err {
        return Error::outcome_unknown(topic.as_str(), sent);
    }
    match err.server_code() {
        Some("MAXLEN") => Error::QueueFull {
            topic: topic.as_str().to_owned(),
        },
        Some("PAUSED") => Error::QueueClosedForInput {
            topic: topic.as_str().to_owned(),
        },
        _ => err.into(),
    }
}

/// The Disque commands, as the SPI implementation and the fan-out and
/// reply modules use them. Jobs come back with the Disque job id as their
/// id and the raw stored body (headers still enveloped).
impl DisqueBackend {
    /// `ADDJOB` on the topic's affinity node with explicit `REPLICATE`,
    /// `RETRY`, `TTL` and timeout.
    ///
    /// An `ADDJOB` that was never sent (no connection), was refused with
    /// `-LEAVING`, whose connection the node closed or reset, or that waited
    /// on a node found hung goes to the next node. The hung node's copy
    /// does not survive a synchronous replication: the client closes the
    /// connection, and Disque deletes a job whose client left before it was
    /// replicated. A copy a dead node had already replicated, or a
    /// `REPLICATE 1`/`ASYNC` copy on a hung node, may then exist twice,
    /// which at-least-once delivery allows. One sent to a node that still
    /// answers and got no reply in time is not sent again, as the node may
    /// still store it: the push fails with [`Error::OutcomeUnknown`].
    #[tracing::instrument(level = "trace", skip(self, body, options), fields(topic = %topic))]
    pub(crate) async fn add(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<JobId> {
        self.ensure_open()?;
        let shared = &*self.shared;
        // One read of the table gives both the node count and the order.
        let nodes = shared.snapshot();
        let node_count = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
        let (cmd, add_timeout) = addjob_cmd(&shared.config, node_count, topic, &body, options);
        let timeout = add_timeout.saturating_add(shared.config.command_timeout);
        let order = affinity_order(nodes, topic);
        let Some(first) = order.first() else {
            return Err(map_add_error(topic, DisqueError::NoNodes));
        };
        // Fast path: the first attempt is awaited directly; only a failure
        // enters the (boxed) failover loop, which continues from it.
        let id = match addjob_on(first, &cmd, timeout).await {
            Ok(id) => id,
            Err(e) => {
                let cmd = &cmd;
                Box::pin(shared.run_from(&order, Some(e), |node| async move {
                    addjob_on(&node, cmd, timeout).await
                }))
                .await
                .map_err(|e| map_add_error(topic, e))?
            }
        };
        Ok(JobId::new(id))
    }

    /// `GETJOB TIMEOUT <wait> COUNT <max> WITHCOUNTERS FROM <topic>` on a
    /// dedicated connection to the topic's affinity node.
    #[tracing::instrument(level = "trace", skip(self), fields(topic = %topic))]
    pub(crate) async fn fetch(
        &self,
        topic: &Topic,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Job>> {
        self.ensure_open()?;
        if max == 0 {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("GETJOB");
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        if wait_ms == 0 {
            cmd.arg("NOHANG");
        } else {
            // TIMEOUT 0 would block forever.
            cmd.arg("TIMEOUT").arg(wait_ms);
        }
        cmd.arg("COUNT")
            .arg(max)
            .arg("WITHCOUNTERS")
            .arg("FROM")
            .arg(topic.as_str());
        let timeout = wait.saturating_add(self.shared.config.command_timeout);
        let cmd = &cmd;
        let shared = &self.shared;
        let jobs = shared
            .run(shared.by_affinity(topic), |node| async move {
                let value = node.query_blocking("GETJOB", cmd, wait, timeout).await?;
                let jobs = parse_jobs("GETJOB", &node, &value)?;
                for job in &jobs {
                    shared.remember_delivery(job.id(), &node);
                }
                Ok(jobs)
            })
            .await?;
        Ok(jobs)
    }

    /// `ACKJOB`, not `FASTACK`: both answer at once, but `ACKJOB` keeps the
    /// acknowledgement until every node holding a copy has confirmed, so a
    /// node that was unreachable for a moment cannot redeliver the job.
    #[tracing::instrument(level = "trace", skip(self, id), fields(job_id = %id))]
    pub(crate) async fn ack(&self, id: &JobId) -> Result<()> {
        let result = self.job_command("ACKJOB", id).await;
        self.forget_delivery(id);
        result.map(drop)
    }

    /// One `ACKJOB id1 id2 ...` per node that delivered the jobs (each ACK
    /// goes to the node that delivered its job), the nodes concurrently. Ids with no recorded delivery are ACKed one by one,
    /// routed by id. On error the deliveries of the failed commands are
    /// kept, so the caller's per-id retry still goes to the right node.
    #[tracing::instrument(level = "trace", skip_all, fields(jobs = ids.len()))]
    pub(crate) async fn ack_many(&self, ids: &[JobId]) -> Result<()> {
        self.ensure_open()?;
        let mut by_node: Vec<(Arc<Node>, Vec<&JobId>)> = Vec::new();
        let mut unrouted = Vec::new();
        if let Ok(map) = self.shared.delivered.lock() {
            for id in ids {
                match map.get(id) {
                    Some(node) => match by_node.iter_mut().find(|(n, _)| Arc::ptr_eq(n, node)) {
                        Some((_, group)) => group.push(id),
                        None => by_node.push((Arc::clone(node), vec![id])),
                    },
                    None => unrouted.push(id),
                }
            }
        } else {
            unrouted.extend(ids);
        }
        let timeout = self.shared.config.command_timeout;
        let batches = by_node.iter().map(|(node, group)| async move {
            let mut cmd = redis::cmd("ACKJOB");
            for id in group {
                cmd.arg(id.as_str());
            }
            let cmd = &cmd;
            // The delivering node first, then the others as for any job.
            let mut candidates = self.shared.by_priority().to_vec();
            candidates.retain(|n| !Arc::ptr_eq(n, node));
            candidates.insert(0, Arc::clone(node));
            let result = self
                .shared
                .run(candidates, |node| async move {
                    node.query("ACKJOB", cmd, timeout).await
                })
                .await;
            if result.is_ok() {
                if let Ok(mut map) = self.shared.delivered.lock() {
                    for id in group {
                        map.remove(*id);
                    }
                }
            }
            result.map(drop).map_err(Error::from)
        });
        let singles = unrouted.iter().map(|id| self.ack(id));
        let (batches, singles) = futures::future::join(
            futures::future::join_all(batches),
            futures::future::join_all(singles),
        )
        .await;
        batches.into_iter().chain(singles).collect()
    }

    /// `NACK`: back in the queue at once, `nacks` counter incremented.
    #[tracing::instrument(level = "trace", skip(self, id), fields(job_id = %id))]
    pub(crate) async fn nack(&self, id: &JobId) -> Result<()> {
        let result = self.job_command("NACK", id).await;
        self.forget_delivery(id);
        result.map(drop)
    }

    /// `ENQUEUE`: puts a fetched job back at once without counting a NACK
    /// (used for jobs a stopping listener fetched but will not run).
    pub(crate) async fn requeue(&self, id: &JobId) -> Result<()> {
        let result = self.job_command("ENQUEUE", id).await;
        self.forget_delivery(id);
        result.map(drop)
    }

    /// `WORKING`: postpones the redelivery; returns the job's retry time.
    #[tracing::instrument(level = "trace", skip(self, id), fields(job_id = %id))]
    pub(crate) async fn working(&self, id: &JobId) -> Result<Duration> {
        let value = self.job_command("WORKING", id).await?;
        as_u64(&value).map(Duration::from_secs).ok_or_else(|| {
            Error::backend(
                DisqueError::UnexpectedReply {
                    command: "WORKING",
                    addr: String::new(),
                    reply: abbreviate(&value),
                },
                false,
            )
        })
    }

    /// The sum of `QLEN` over every node. Fails when a node cannot be read
    /// (the sum would be partial).
    pub(crate) async fn queue_length(&self, topic: &Topic) -> Result<u64> {
        self.ensure_open()?;
        let results = self.per_node("QLEN", topic, |_| {
            let mut cmd = redis::cmd("QLEN");
            cmd.arg(topic.as_str());
            cmd
        });
        let mut total = 0u64;
        let mut last_err = None;
        let mut any = false;
        for (node, result) in results.await {
            match result.and_then(|v| as_u64(&v).ok_or_else(|| unexpected("QLEN", &node, &v))) {
                Ok(n) => {
                    any = true;
                    total += n;
                }
                Err(e) => last_err = Some(e),
            }
        }
        match last_err {
            // A node that could not be read may hold some of the jobs: a
            // partial sum would be a wrong answer.
            Some(e) if any => Err(partial(e)),
            Some(e) => Err(e.into()),
            None => Ok(total),
        }
    }

    /// The queues of every node (`QSCAN BUSYLOOP`, one full scan per
    /// node), merged and sorted. Fails rather than answer from some nodes
    /// only.
    pub(crate) async fn queue_names(&self) -> Result<Vec<String>> {
        self.ensure_open()?;
        let timeout = self.shared.config.command_timeout;
        let nodes = self.shared.snapshot();
        let scans = nodes.iter().map(|node| async move {
            let mut cmd = redis::cmd("QSCAN");
            cmd.arg("BUSYLOOP");
            let value = node.query("QSCAN", &cmd, timeout).await?;
            match &value {
                Value::Array(parts) if parts.len() == 2 => match &parts[1] {
                    Value::Array(names) => Ok(names.iter().filter_map(as_string).collect()),
                    _ => Err(unexpected("QSCAN", node, &value)),
                },
                _ => Err(unexpected("QSCAN", node, &value)),
            }
        });
        let mut names = std::collections::BTreeSet::new();
        for result in futures::future::join_all(scans).await {
            let node_names: Vec<String> = result?;
            names.extend(node_names);
        }
        Ok(names.into_iter().collect())
    }

    /// `QPEEK` on every reachable node, merged round-robin starting with
    /// the topic's affinity node (each node's list is oldest first; Disque
    /// ids carry no creation time to order them globally).
    pub(crate) async fn peek_jobs(&self, topic: &Topic, n: usize) -> Result<Vec<Job>> {
        let (jobs, failed) = self.peek_jobs_counting_failures(topic, n).await?;
        match failed {
            Some(err) => Err(partial(err)),
            None => Ok(jobs),
        }
    }

    /// `QPEEK` on every known node, merged as in
    /// [`DisqueBackend::peek_jobs`], with the error of a node that could
    /// not be read (the list is then partial). Fails only when no node
    /// answered.
    pub(crate) async fn peek_jobs_counting_failures(
        &self,
        topic: &Topic,
        n: usize,
    ) -> Result<(Vec<Job>, Option<DisqueError>)> {
        self.ensure_open()?;
        if n == 0 {
            return Ok((Vec::new(), None));
        }
        let results = self.per_node("QPEEK", topic, |_| {
            let mut cmd = redis::cmd("QPEEK");
            cmd.arg(topic.as_str()).arg(n);
            cmd
        });
        let mut lists = Vec::new();
        let mut last_err = None;
        for (node, result) in results.await {
            match result.and_then(|v| parse_jobs("QPEEK", &node, &v)) {
                Ok(jobs) => lists.push(jobs.into_iter()),
                Err(e) => last_err = Some(e),
            }
        }
        if lists.is_empty() {
            if let Some(e) = last_err {
                return Err(e.into());
            }
        }
        let mut merged = Vec::with_capacity(n);
        while merged.len() < n {
            let before = merged.len();
            for list in &mut lists {
                if let Some(job) = list.next() {
                    merged.push(job);
                }
            }
            if merged.len() == before {
                break;
            }
        }
        merged.truncate(n);
        Ok((merged, last_err))
    }

    pub(crate) async fn close_connections(&self) -> Result<()> {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return Err(Error::Shutdown);
        }
        self.shared.cancel.cancel();
        let task = self.shared.refresher.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
        // Nodes drain concurrently: a hung one costs `command_timeout`
        // once, not once per node.
        let drain = self.shared.config.command_timeout;
        let nodes = self.shared.snapshot();
        futures::future::join_all(nodes.iter().map(|node| node.disconnect(drain))).await;
        if let Ok(mut map) = self.shared.delivered.lock() {
            map.clear();
        }
        tracing::debug!("Disque backend closed");
        Ok(())
    }
}

impl DisqueBackend {
    /// Runs a command on every node concurrently, in the topic's affinity
    /// order.
    async fn per_node(
        &self,
        name: &'static str,
        topic: &Topic,
        build: impl Fn(&Node) -> redis::Cmd,
    ) -> Vec<(Arc<Node>, Result<Value, DisqueError>)> {
        let timeout = self.shared.config.command_timeout;
        let nodes = self.shared.by_affinity(topic);
        let queries = nodes.iter().map(|node| {
            let cmd = build(node);
            async move { node.query(name, &cmd, timeout).await }
        });
        let results = futures::future::join_all(queries).await;
        nodes.iter().cloned().zip(results).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_jobs_with_counters() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let v = Value::Array(vec![Value::Array(vec![
            bulk("q"),
            bulk("D-1"),
            bulk("body"),
            bulk("nacks"),
            Value::Int(2),
            bulk("additional-deliveries"),
            Value::Int(3),
        ])]);
        let job = &parse_jobs_for_test(&v)[0];
        assert_eq!(job.topic().as_str(), "q");
        assert_eq!(job.body().as_ref(), b"body");
        assert_eq!(job.attempt(), 6, "1 + 2 nacks + 3 additional deliveries");
        assert!(parse_jobs_for_test(&Value::Nil).is_empty());
    }

    fn parse_jobs_for_test(v: &Value) -> Vec<Job> {
        match v {
            Value::Nil => Vec::new(),
            Value::Array(items) => items.iter().filter_map(parse_job).collect(),
            _ => Vec::new(),
        }
    }
}
