//! Pushing: one job (`XADD`, the schedule script, or the message-id
//! script), and a batch of them pipelined in one round trip.
//!
//! The job id is core's: [`JobMeta::stamp`] put it in the
//! `ezmq-message-id` header before the backend sees the push. It is stored
//! with the other headers (stream entry fields, or the delayed member) and
//! returned as is; the stream entry id stays internal (acks, claims).

use std::borrow::Cow;
use std::time::Duration;

use bytes::Bytes;
use ezmq_core::spi::Source;
use ezmq_core::{Error, JobId, JobMeta, PushOptions, Result, Topic};
use redis::{Cmd, RedisResult};

use crate::backend::{ms_ceil, unix_ms, Inner};
use crate::codec::Outgoing;
use crate::conn::Conn;
use crate::error;
use crate::keys::TopicKeys;
use crate::scripts;

/// The command name of a batch in errors.
const BATCH: &str = "push pipeline";

/// `options` with core's stamp: as given when stamped (the producer
/// pipeline always stamps), else a stamped copy (a caller of the backend
/// without core gets core's id all the same, never one of this backend's).
fn stamped(options: &PushOptions) -> (JobId, Cow<'_, PushOptions>) {
    match options.stamped_id() {
        Some(id) => (id, Cow::Borrowed(options)),
        None => {
            let mut own = options.clone();
            let id = JobMeta::stamp(&mut own);
            (id, Cow::Owned(own))
        }
    }
}

/// The push's delay, `None` for an immediate one.
fn delay_of(options: &PushOptions) -> Option<Duration> {
    options.delay.filter(|d| !d.is_zero())
}

impl Inner {
    /// The stored form of a pushed message, borrowed from the push: its
    /// body and headers as they are (the job id among them), and its
    /// expiry.
    pub(crate) fn outgoing<'a>(&self, body: &'a Bytes, options: &'a PushOptions) -> Outgoing<'a> {
        Outgoing {
            body,
            headers: &options.headers,
            expires_at: options
                .ttl
                .map(|ttl| unix_ms().saturating_add(ms_ceil(ttl))),
        }
    }

    /// The `XADD` of `message` to `stream`, capped by
    /// [`RedisConfig::stream_max_len`](crate::RedisConfig::stream_max_len).
    fn xadd_cmd(&self, stream: &str, message: Outgoing<'_>) -> Cmd {
        let max_len = self.config.stream_max_len;
        // Sized for the usual push (stream, `*`, body, headers) so building
        // the command does not reallocate.
        let args = 4 + 2 * message.headers.len() + 2 + if max_len.is_some() { 3 } else { 0 };
        let mut cmd = Cmd::with_capacity(args, stream.len() + message.body.len() + 128);
        cmd.arg("XADD").arg(stream);
        if let Some(max) = max_len {
            cmd.arg("MAXLEN").arg("~").arg(max);
        }
        cmd.arg("*");
        message.write_fields(&mut cmd);
        cmd
    }

    /// A push with a producer-chosen message id: stored unless a push with
    /// that id was stored within
    /// [`RedisConfig::message_id_window`](crate::RedisConfig::message_id_window)
    /// (one script, so atomic). Returns the first push's job id either way.
    async fn push_once(
        &self,
        conn: &mut Conn,
        topic: &Topic,
        message_id: &str,
        job_id: &JobId,
        message: Outgoing<'_>,
        delay: Option<Duration>,
    ) -> Result<JobId> {
        let prefix = &self.config.key_prefix;
        let keys = TopicKeys::queue(prefix, topic);
        let mut invocation = scripts::PUSH_ONCE.prepare_invoke();
        invocation
            .key(TopicKeys::message_id(prefix, topic, message_id))
            .key(&keys.stream)
            .key(&keys.delayed)
            .arg(ms_ceil(self.config.message_id_window).max(1))
            .arg(job_id.as_str())
            .arg(self.config.stream_max_len.unwrap_or(0))
            .arg(delay.map_or(0, ms_ceil));
        match delay {
            Some(_) => {
                invocation.arg(message.delayed_member());
            }
            None => {
                invocation.arg("");
                for field in message.fields() {
                    invocation.arg(field);
                }
            }
        }
        let (stored, first): (i64, String) = invocation
            .invoke_async(conn)
            .await
            .map_err(error::push_sent("message-id push script", topic))?;
        if stored == 0 {
            tracing::debug!(%topic, %message_id, job_id = %first, "push deduplicated: that message id is stored already");
        }
        Ok(JobId::new(first))
    }

    /// See [`Backend::publish`](ezmq_core::spi::Backend::publish): an
    /// `XADD`, the schedule script for a delayed push, the message-id
    /// script for a push with [`PushOptions::message_id`].
    pub(crate) async fn publish(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<JobId> {
        self.ensure_open()?;
        let (id, options) = stamped(options);
        let outgoing = self.outgoing(&body, &options);
        let delay = delay_of(&options);
        // An error getting the connection means nothing was sent.
        let mut conn = self
            .conn()
            .for_push()
            .await
            .map_err(error::command("connect for a push"))?;
        let stream = TopicKeys::queue_stream(&self.config.key_prefix, topic);
        let id = match (&options.message_id, delay) {
            (Some(message_id), _) => {
                let first = self
                    .push_once(&mut conn, topic, message_id, &id, outgoing, delay)
                    .await?;
                if let Some(delay) = delay {
                    self.note_delayed(topic, delay);
                }
                first
            }
            (None, None) => {
                let () = self
                    .xadd_cmd(&stream, outgoing)
                    .query_async(&mut conn)
                    .await
                    .map_err(error::push_sent("XADD", topic))?;
                id
            }
            (None, Some(delay)) => {
                let delayed = TopicKeys::queue(&self.config.key_prefix, topic).delayed;
                let _due: i64 = scripts::SCHEDULE
                    .key(&delayed)
                    .arg(ms_ceil(delay))
                    .arg(outgoing.delayed_member())
                    .invoke_async(&mut conn)
                    .await
                    .map_err(error::push_sent("schedule script", topic))?;
                self.note_delayed(topic, delay);
                id
            }
        };
        self.wait_replicas(&stream).await?;
        tracing::trace!(%topic, message_id = %id, delayed = delay.is_some(), "pushed");
        Ok(id)
    }

    /// See [`Backend::publish_batch`](ezmq_core::spi::Backend::publish_batch).
    /// The immediate and delayed jobs go in one pipeline (`XADD`s, and the
    /// schedule script for the delayed ones, loaded first in the same
    /// pipeline) on the connection a single push uses: one round trip, all
    /// keys of the topic's hash tag, so one slot on a cluster. Jobs with a
    /// producer-chosen message id take the single path (the message-id
    /// script), concurrently with the pipeline. One `WAIT` for the whole
    /// batch when [`RedisConfig::wait_replicas`](crate::RedisConfig::wait_replicas)
    /// is set.
    pub(crate) async fn publish_batch(
        &self,
        topic: &Topic,
        jobs: &[(Bytes, PushOptions)],
    ) -> Vec<Result<JobId>> {
        if self.ensure_open().is_err() {
            return jobs.iter().map(|_| Err(Error::Shutdown)).collect();
        }
        let (once, piped): (Vec<usize>, Vec<usize>) =
            (0..jobs.len()).partition(|&i| jobs[i].1.message_id.is_some());
        let singles = futures::future::join_all(
            once.iter()
                .map(|&i| self.publish(topic, jobs[i].0.clone(), &jobs[i].1)),
        );
        let (singles, pipelined) =
            futures::future::join(singles, self.pipelined(topic, jobs, &piped)).await;
        let mut out: Vec<Option<Result<JobId>>> = (0..jobs.len()).map(|_| None).collect();
        for (i, result) in once.into_iter().zip(singles) {
            out[i] = Some(result);
        }
        for (i, result) in piped.into_iter().zip(pipelined) {
            out[i] = Some(result);
        }
        out.into_iter()
            .map(|result| {
                result.unwrap_or_else(|| {
                    Err(error::unexpected(BATCH, "a job of the batch got no result"))
                })
            })
            .collect()
    }

    /// The jobs `which` of `jobs` (none with a message id) in one
    /// pipeline; their results in the order of `which`.
    async fn pipelined(
        &self,
        topic: &Topic,
        jobs: &[(Bytes, PushOptions)],
        which: &[usize],
    ) -> Vec<Result<JobId>> {
        if which.is_empty() {
            return Vec::new();
        }
        let keys = TopicKeys::queue(&self.config.key_prefix, topic);
        let mut pipe = redis::Pipeline::with_capacity(which.len() + 1);
        pipe.ignore_errors();
        let mut ids = Vec::with_capacity(which.len());
        let mut soonest: Option<Duration> = None;
        for &i in which {
            let (body, options) = &jobs[i];
            let (id, options) = stamped(options);
            let outgoing = self.outgoing(body, &options);
            match delay_of(&options) {
                None => {
                    pipe.add_command(self.xadd_cmd(&keys.stream, outgoing));
                }
                Some(delay) => {
                    if soonest.is_none() {
                        // Loaded on the node that runs the pipeline, so
                        // the `EVALSHA`s after it find the script.
                        pipe.load_script(&scripts::SCHEDULE).ignore();
                    }
                    soonest = Some(soonest.map_or(delay, |s| s.min(delay)));
                    let mut invocation = scripts::SCHEDULE.prepare_invoke();
                    invocation
                        .key(&keys.delayed)
                        .arg(ms_ceil(delay))
                        .arg(outgoing.delayed_member());
                    pipe.invoke_script(&invocation);
                }
            }
            ids.push(id);
        }
        let mut conn = match self.conn().for_push().await {
            Ok(conn) => conn,
            // Nothing was sent.
            Err(err) => {
                return ids
                    .iter()
                    .map(|_| Err(error::command("connect for a push")(err.clone())))
                    .collect();
            }
        };
        let replies: RedisResult<Vec<RedisResult<()>>> = pipe.query_async(&mut conn).await;
        let replies = match replies {
            Ok(replies) if replies.len() == ids.len() => replies,
            Ok(replies) => {
                let detail = format!("{} replies to {} pushes", replies.len(), ids.len());
                return ids
                    .iter()
                    .map(|_| Err(error::unexpected(BATCH, detail.clone())))
                    .collect();
            }
            Err(err) => {
                return ids
                    .iter()
                    .map(|_| Err(error::push_sent(BATCH, topic)(err.clone())))
                    .collect();
            }
        };
        if let Some(delay) = soonest {
            self.note_delayed(topic, delay);
        }
        let stored = replies.iter().filter(|r| r.is_ok()).count();
        let replicated = if stored > 0 {
            self.replicated(&keys.stream).await
        } else {
            Ok(())
        };
        tracing::debug!(%topic, jobs = ids.len(), stored, "batch pushed in one pipeline");
        ids.into_iter()
            .zip(replies)
            .map(|(id, reply)| match reply {
                Ok(()) => match &replicated {
                    Ok(()) => Ok(id),
                    Err(err) => Err(err.clone().into()),
                },
                Err(err) => {
                    tracing::debug!(%topic, message_id = %id, error = %err, "a push of the batch failed");
                    Err(error::push_sent(BATCH, topic)(err))
                }
            })
            .collect()
    }

    /// Tells this instance's listener of `topic`, if any, that a delayed
    /// message comes due in `delay`.
    pub(crate) fn note_delayed(&self, topic: &Topic, delay: Duration) {
        if let Some(state) = self.existing_state(&Source::Topic(topic.clone())) {
            state.note_due_in(delay);
        }
    }
}
