//! Jobs by id and state ([`JobStore`]), read from where the backend keeps
//! them: the delayed sorted set (scheduled and retrying jobs, the due time
//! its score), and the stream, whose entries are the ready jobs plus the
//! pending ones (running: delivered, not settled; acknowledged entries are
//! deleted).
//!
//! Every call scans the topic's delayed set or stream: O(n) in the jobs of
//! that state, which suits inspection and the occasional cancel, not a hot
//! path (nothing is indexed at push, so plain pushes cost nothing more).
//! Cancelling and promoting are single scripts that find the job and act
//! on it in one step, atomic with the listener's own moves: a job that a
//! listener took first is reported running (or not found), never both
//! cancelled and delivered.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use ezmq_core::spi::{Cancelled, JobInfo, JobState, JobStore, QueueStats};
use ezmq_core::{Job, JobId, Result, Topic, MESSAGE_ID_HEADER};
use redis::Value;

use crate::backend::RedisBackend;
use crate::codec::{self, Message};
use crate::error;
use crate::keys::{TopicKeys, QUEUE_GROUP};
use crate::scripts;

/// Most pending entries read to tell running jobs from ready ones.
const MAX_PENDING_SCAN: usize = 100_000;

/// A delayed job: its due time and message.
struct Delayed {
    due_ms: u64,
    job: Job,
}

impl RedisBackend {
    /// Runs `script` (one of those that find a job by id: KEYS delayed
    /// set and stream, ARGV id and group) for job `id` of `topic`.
    async fn by_id<T: redis::FromRedisValue>(
        &self,
        script: &redis::Script,
        name: &'static str,
        topic: &Topic,
        id: &JobId,
    ) -> Result<T> {
        self.inner.ensure_open()?;
        let keys = TopicKeys::queue(&self.inner.config.key_prefix, topic);
        script
            .key(&keys.delayed)
            .key(&keys.stream)
            .arg(id.as_str())
            .arg(QUEUE_GROUP)
            .invoke_async(&mut self.inner.conn())
            .await
            .map_err(error::command(name))
    }

    /// Every delayed job of `topic`, soonest first.
    async fn delayed(&self, topic: &Topic, keys: &TopicKeys) -> Result<Vec<Delayed>> {
        let raw: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE")
            .arg(&keys.delayed)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut self.inner.conn())
            .await
            .map_err(error::command("ZRANGE"))?;
        Ok(raw
            .into_iter()
            .filter_map(|(member, score)| delayed_of(topic, &member, score))
            .collect())
    }

    /// Every stream entry of `topic` as a job with its entry id, and the
    /// ids of the pending ones.
    async fn entries(
        &self,
        topic: &Topic,
        keys: &TopicKeys,
    ) -> Result<(Vec<(String, Job)>, std::collections::HashSet<String>)> {
        let value: Value = redis::cmd("XRANGE")
            .arg(&keys.stream)
            .arg("-")
            .arg("+")
            .query_async(&mut self.inner.conn())
            .await
            .map_err(error::command("XRANGE"))?;
        let entries = codec::entries("XRANGE", value)?
            .into_iter()
            .filter_map(|entry| {
                let message = entry.message?;
                Some((entry.id.clone(), job_of(topic, message, entry.id)))
            })
            .collect();
        let pending: redis::RedisResult<Vec<(String, String, u64, u64)>> = redis::cmd("XPENDING")
            .arg(&keys.stream)
            .arg(QUEUE_GROUP)
            .arg("-")
            .arg("+")
            .arg(MAX_PENDING_SCAN)
            .query_async(&mut self.inner.conn())
            .await;
        let pending = match pending {
            Ok(rows) => rows.into_iter().map(|(id, ..)| id).collect(),
            // No group yet: nothing was ever delivered.
            Err(err) if err.code() == Some("NOGROUP") => Default::default(),
            Err(err) => return Err(error::command("XPENDING")(err)),
        };
        Ok((entries, pending))
    }

    /// Every job of `topic` in `state`.
    async fn in_state(&self, topic: &Topic, state: JobState) -> Result<Vec<JobInfo>> {
        let keys = TopicKeys::queue(&self.inner.config.key_prefix, topic);
        Ok(match state {
            JobState::Scheduled | JobState::Retrying => self
                .delayed(topic, &keys)
                .await?
                .into_iter()
                .filter(|d| delayed_state(&d.job) == state)
                .map(|d| JobInfo::new(d.job, state, Some(at(d.due_ms))))
                .collect(),
            JobState::Ready | JobState::Running => {
                let (entries, pending) = self.entries(topic, &keys).await?;
                let running = state == JobState::Running;
                entries
                    .into_iter()
                    .filter(|(id, _)| pending.contains(id) == running)
                    .map(|(_, job)| JobInfo::new(job, state, None))
                    .collect()
            }
            _ => Vec::new(),
        })
    }
}

#[async_trait]
impl JobStore for RedisBackend {
    async fn job(&self, topic: &Topic, id: &JobId) -> Result<Option<JobInfo>> {
        let found: Value = self
            .by_id(&scripts::FIND_JOB_BY_ID, "job lookup script", topic, id)
            .await?;
        let Value::Array(parts) = found else {
            return Err(error::unexpected("job lookup script", "not an array"));
        };
        let mut parts = parts.into_iter();
        let kind = parts.next();
        match (kind, parts.next(), parts.next()) {
            (Some(Value::Int(1)), Some(member), Some(score)) => {
                let member: Vec<u8> = redis::from_redis_value(member).map_err(bad_lookup)?;
                let score: f64 = redis::from_redis_value(score).map_err(bad_lookup)?;
                Ok(delayed_of(topic, &member, score).map(|d| {
                    let state = delayed_state(&d.job);
                    JobInfo::new(d.job, state, Some(at(d.due_ms)))
                }))
            }
            (Some(Value::Int(2)), Some(entry), Some(running)) => {
                let running: i64 = redis::from_redis_value(running).map_err(bad_lookup)?;
                let state = if running == 1 {
                    JobState::Running
                } else {
                    JobState::Ready
                };
                Ok(codec::entries("job lookup script", entry)?
                    .into_iter()
                    .find_map(|entry| {
                        let message = entry.message?;
                        Some(JobInfo::new(job_of(topic, message, entry.id), state, None))
                    }))
            }
            _ => Ok(None),
        }
    }

    async fn jobs(
        &self,
        topic: &Topic,
        state: JobState,
        after: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<JobInfo>> {
        self.inner.ensure_open()?;
        let mut jobs = self.in_state(topic, state).await?;
        jobs.retain(|info| after.is_none_or(|after| info.job.id() > after));
        jobs.sort_by(|a, b| a.job.id().cmp(b.job.id()));
        jobs.truncate(limit);
        Ok(jobs)
    }

    async fn count(&self, topic: &Topic, state: JobState) -> Result<u64> {
        self.inner.ensure_open()?;
        match state {
            JobState::Ready => self.queue_len(topic).await,
            JobState::Running => Ok(self.in_flight(topic).await?.unwrap_or(0)),
            _ => Ok(self.in_state(topic, state).await?.len() as u64),
        }
    }

    async fn cancel(&self, topic: &Topic, id: &JobId) -> Result<Cancelled> {
        let outcome: i64 = self
            .by_id(&scripts::CANCEL, "cancel script", topic, id)
            .await?;
        Ok(match outcome {
            1 => Cancelled::Removed,
            -1 => Cancelled::Running,
            _ => Cancelled::NotFound,
        })
    }

    async fn promote(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        self.inner.ensure_open()?;
        let keys = TopicKeys::queue(&self.inner.config.key_prefix, topic);
        let moved: i64 = scripts::PROMOTE_JOB
            .key(&keys.delayed)
            .key(&keys.stream)
            .arg(id.as_str())
            .arg(self.inner.config.stream_max_len.unwrap_or(0))
            .invoke_async(&mut self.inner.conn())
            .await
            .map_err(error::command("promote script"))?;
        // A listener blocked in `XREADGROUP` wakes on the new entry.
        Ok(moved == 1)
    }

    /// The new due time is the server's now plus how far `at` is from
    /// this machine's now (rounded up to the millisecond), so a client
    /// clock ahead of the server's never makes the job early by more than
    /// the skew.
    async fn reschedule(&self, topic: &Topic, id: &JobId, at: SystemTime) -> Result<bool> {
        self.inner.ensure_open()?;
        let keys = TopicKeys::queue(&self.inner.config.key_prefix, topic);
        let delay_ms = match at.duration_since(SystemTime::now()) {
            Ok(ahead) => i64::try_from(crate::backend::ms_ceil(ahead)).unwrap_or(i64::MAX),
            Err(_) => 0,
        };
        let moved: i64 = scripts::RESCHEDULE_JOB
            .key(&keys.delayed)
            .arg(id.as_str())
            .arg(delay_ms)
            .invoke_async(&mut self.inner.conn())
            .await
            .map_err(error::command("reschedule script"))?;
        if moved == 1 {
            // A listener of this process waits for the soonest due time it
            // knows: tell it (other processes look every `block_wait`).
            self.inner
                .note_delayed(topic, Duration::from_millis(delay_ms.unsigned_abs()));
        }
        Ok(moved == 1)
    }
}

/// The job a stored message is, its id the stamped one (else `fallback`).
fn job_of(topic: &Topic, message: Message, fallback: String) -> Job {
    let id = message
        .headers
        .get(MESSAGE_ID_HEADER)
        .map_or(fallback, str::to_owned);
    let attempt = message.headers.attempt().unwrap_or(1);
    Job::new(JobId::new(id), topic.clone(), message.body)
        .with_headers(message.headers)
        .with_attempt(attempt)
}

/// A delayed job waits for its first delivery (scheduled) or for a retry.
/// A reply of the job lookup script that does not parse.
fn bad_lookup(err: redis::ParsingError) -> ezmq_core::Error {
    error::unexpected("job lookup script", err.to_string())
}

/// The delayed job of sorted-set `member` due at `score` (Unix ms).
fn delayed_of(topic: &Topic, member: &[u8], score: f64) -> Option<Delayed> {
    let message = Message::from_member(member)?;
    let fallback = String::from_utf8_lossy(member.get(..32)?).into_owned();
    Some(Delayed {
        job: job_of(topic, message, fallback),
        due_ms: score.max(0.0) as u64,
    })
}

fn delayed_state(job: &Job) -> JobState {
    if job.attempt() > 1 {
        JobState::Retrying
    } else {
        JobState::Scheduled
    }
}

/// Unix milliseconds as a time.
fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}
