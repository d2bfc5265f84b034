//! Cancelling, promoting and rescheduling a found job on Disque, which has
//! no conditional delete: every step starts from a fresh read of each
//! copy (`SHOW` on every node, beside its `TIME`) and acts only when no
//! node can queue a copy by itself within [`GUARD`].
//!
//! * A queued copy is taken out with `DEQUEUE`, which wins or loses
//!   against `GETJOB` atomically on its node: won, no consumer can get it.
//! * A copy that is not queued is queued only by its node's timer, at a
//!   queue time the read gave (never early). A step acts while that is at
//!   least [`GUARD`] away; closer, it waits until the node has queued the
//!   copy (then `DEQUEUE` decides) or delivered it.
//! * The job is then removed with `ACKJOB` on every node holding a copy
//!   (Disque's cluster-wide acknowledgement; `DELJOB` would only drop the
//!   local copy and leave replicas to queue it again).
//!
//! The promise holds as long as the `ACKJOB` (or `ENQUEUE`) reaches the
//! nodes within [`GUARD`] of the read it was decided on; a step that sees
//! afterwards that it took longer says so in a warning.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ezmq_core::job_meta::RUN_AT_HEADER;
use ezmq_core::spi::{envelope, Cancelled};
use ezmq_core::{Error, JobId, PushOptions, Result, Topic, ATTEMPT_HEADER, MESSAGE_ID_HEADER};
use tokio::time::Instant;

use super::copy::{DisqueState, Phase};
use super::view::{DisqueJob, Found};
use crate::addjob::ceil_secs;
use crate::backend::DisqueBackend;
use crate::error::DisqueError;
use crate::node::as_u64;
use crate::push_options::DisquePushOptions;

/// How far away the next queueing of every copy must be, when a step
/// sends its `ACKJOB` or `ENQUEUE`, for it to act on a job: the time that
/// one small command is trusted to take.
pub(super) const GUARD: Duration = Duration::from_millis(250);
/// How long after a copy's queue time a step reads it again: a node queues
/// a due job within its next timer round (50 to 100 ms).
const SETTLE: Duration = Duration::from_millis(60);
/// How long a step re-reads a job that is still being added.
const ADDING_POLL: Duration = Duration::from_millis(50);
/// How long a step keeps re-reading a job that keeps changing.
const BUDGET: Duration = Duration::from_secs(10);

/// A copy this step took out of its queue.
struct Taken {
    node: std::sync::Arc<crate::node::Node>,
    id: JobId,
    /// The earliest its node may queue it again.
    requeue: Option<Instant>,
}

impl DisqueBackend {
    /// Each Disque job of `found`, read again on every node.
    async fn reread(&self, found: &Found) -> Result<Found> {
        let reads = found.jobs.iter().map(|job| async move {
            let copies = self.show_everywhere(&job.id).await?;
            Ok::<_, Error>(DisqueJob {
                id: job.id.clone(),
                copies,
            })
        });
        Ok(Found {
            jobs: futures::future::try_join_all(reads).await?,
        })
    }

    /// Sleeps until `until`, unless that is past `give_up` (the job keeps
    /// changing: a retryable error) or the backend closes.
    async fn wait_until(
        &self,
        topic: &Topic,
        id: &JobId,
        until: Instant,
        give_up: Instant,
    ) -> Result<()> {
        if until > give_up {
            return Err(control(
                topic,
                id,
                "the job kept changing state; nothing was done",
                true,
            ));
        }
        tokio::select! {
            () = tokio::time::sleep_until(until) => Ok(()),
            () = self.shared.cancel.cancelled() => Err(Error::Shutdown),
        }
    }

    /// Removes job `id` (its Disque jobs in `found`) unless it runs.
    pub(super) async fn cancel_found(
        &self,
        topic: &Topic,
        id: &JobId,
        found: Found,
    ) -> Result<Cancelled> {
        let give_up = Instant::now() + BUDGET;
        let mut found = found;
        loop {
            found = self.reread(&found).await?;
            let live: Vec<(DisqueJob, Phase)> = found.live().map(|(j, p)| (j.clone(), p)).collect();
            if live.is_empty() {
                return Ok(Cancelled::NotFound);
            }
            if live.iter().any(|(_, p)| *p == Phase::Delivered) {
                return Ok(Cancelled::Running);
            }
            let next = live.iter().filter_map(|(j, _)| j.next_queueing()).min();
            let now = Instant::now();
            if live.iter().any(|(_, p)| *p == Phase::Adding) {
                self.wait_until(topic, id, now + ADDING_POLL, give_up)
                    .await?;
                continue;
            }
            if let Some(at) = next.filter(|at| *at < now + GUARD) {
                self.wait_until(topic, id, at.max(now) + SETTLE, give_up)
                    .await?;
                continue;
            }
            let ready = live
                .iter()
                .filter(|(_, p)| *p == Phase::Ready)
                .map(|(j, _)| j);
            let takes = futures::future::try_join_all(ready.map(|job| self.take_out(job))).await?;
            let lost = takes.iter().any(Vec::is_empty);
            let taken: Vec<Taken> = takes.into_iter().flatten().collect();
            let deadline = next
                .into_iter()
                .chain(taken.iter().filter_map(|t| t.requeue))
                .min();
            if lost || deadline.is_some_and(|d| d < Instant::now() + GUARD) {
                // A consumer took one first (the next read says running),
                // or time ran short: give back what was taken.
                self.put_back(&taken).await?;
                continue;
            }
            let jobs: Vec<DisqueJob> = live.into_iter().map(|(j, _)| j).collect();
            self.ack_everywhere(&jobs).await?;
            if deadline.is_some_and(|d| Instant::now() > d) {
                tracing::warn!(topic = %topic, message_id = %id, "a cancel's ACKJOB came later than the job's next queue time: it may have raced a delivery");
            }
            let attempt = jobs
                .first()
                .and_then(|j| j.job(topic))
                .map(|(j, _)| j.attempt());
            tracing::debug!(topic = %topic, message_id = %id, ?attempt, "job cancelled");
            return Ok(Cancelled::Removed);
        }
    }

    /// `DEQUEUE` of every queued copy of `job`: the copies taken (none when
    /// consumers took it first).
    async fn take_out(&self, job: &DisqueJob) -> Result<Vec<Taken>> {
        let timeout = self.shared.config.command_timeout;
        let queued = job.copies.iter().filter(|c| c.state == DisqueState::Queued);
        let tries = queued.map(|copy| async move {
            let mut cmd = redis::cmd("DEQUEUE");
            cmd.arg(copy.id.as_str());
            let value = copy.node.query("DEQUEUE", &cmd, timeout).await?;
            // Its queue time only moves later from the read on; a queueing
            // in between sets it to at least RETRY - 250 ms from then.
            let sent = copy.clock.sent;
            let requeue = [
                copy.requeue_in_ms.map(|r| sent + Duration::from_millis(r)),
                (copy.retry_s > 0).then(|| {
                    sent + Duration::from_millis(
                        copy.retry_s.saturating_mul(1000).saturating_sub(250),
                    )
                }),
            ]
            .into_iter()
            .flatten()
            .min();
            Ok::<_, DisqueError>((as_u64(&value) == Some(1)).then(|| Taken {
                node: std::sync::Arc::clone(&copy.node),
                id: copy.id.clone(),
                requeue,
            }))
        });
        let taken = futures::future::try_join_all(tries).await?;
        Ok(taken.into_iter().flatten().collect())
    }

    /// `ENQUEUE` of copies this step took out (Disque counts it as an
    /// additional delivery).
    async fn put_back(&self, taken: &[Taken]) -> Result<()> {
        let timeout = self.shared.config.command_timeout;
        let sends = taken.iter().map(|t| async move {
            let mut cmd = redis::cmd("ENQUEUE");
            cmd.arg(t.id.as_str());
            t.node.query("ENQUEUE", &cmd, timeout).await
        });
        futures::future::try_join_all(sends).await?;
        Ok(())
    }

    /// `ACKJOB` of each job on every node holding a copy of it.
    async fn ack_everywhere(&self, jobs: &[DisqueJob]) -> Result<()> {
        let timeout = self.shared.config.command_timeout;
        let acks = jobs
            .iter()
            .flat_map(|job| job.copies.iter())
            .map(|copy| async move {
                let mut cmd = redis::cmd("ACKJOB");
                cmd.arg(copy.id.as_str());
                copy.node.query("ACKJOB", &cmd, timeout).await
            });
        futures::future::try_join_all(acks).await?;
        Ok(())
    }

    /// Makes job `id` ready now when it waits; true when it did, or when
    /// it came due while this waited for it.
    pub(super) async fn promote_found(
        &self,
        topic: &Topic,
        id: &JobId,
        found: Found,
    ) -> Result<bool> {
        let give_up = Instant::now() + BUDGET;
        let mut found = found;
        let mut came_due = false;
        loop {
            found = self.reread(&found).await?;
            let Some(target) = self
                .waiting_target(topic, id, &found, give_up, &mut came_due)
                .await?
            else {
                return Ok(came_due);
            };
            let Some(target) = target else { continue };
            if self.enqueue_waiting(&target).await? {
                let attempt = target.job(topic).map(|(j, _)| j.attempt());
                tracing::debug!(topic = %topic, message_id = %id, ?attempt, "job promoted");
                return Ok(true);
            }
        }
    }

    /// The Disque job of `found` to act on when every one is waiting and
    /// none comes due within [`GUARD`]: `None` when the job is not waiting
    /// (finished, ready or running), `Some(None)` after waiting for a
    /// change (read again).
    async fn waiting_target(
        &self,
        topic: &Topic,
        id: &JobId,
        found: &Found,
        give_up: Instant,
        came_due: &mut bool,
    ) -> Result<Option<Option<DisqueJob>>> {
        let live: Vec<(&DisqueJob, Phase)> = found.live().collect();
        if live.is_empty()
            || live
                .iter()
                .any(|(_, p)| matches!(p, Phase::Delivered | Phase::Ready))
        {
            return Ok(None);
        }
        let now = Instant::now();
        if live.iter().any(|(_, p)| *p == Phase::Adding) {
            self.wait_until(topic, id, now + ADDING_POLL, give_up)
                .await?;
            return Ok(Some(None));
        }
        let next = live.iter().filter_map(|(j, _)| j.next_queueing()).min();
        if let Some(at) = next.filter(|at| *at < now + GUARD) {
            self.wait_until(topic, id, at.max(now) + SETTLE, give_up)
                .await?;
            *came_due = true;
            return Ok(Some(None));
        }
        let newest = live
            .into_iter()
            .map(|(j, _)| j)
            .max_by_key(|j| j.judge().map_or(0, |c| c.ctime_ms));
        Ok(Some(newest.cloned()))
    }

    /// `ENQUEUE` of a waiting job's creator copy: true when it was queued.
    async fn enqueue_waiting(&self, job: &DisqueJob) -> Result<bool> {
        let Some(copy) = job.judge() else {
            return Ok(false);
        };
        let mut cmd = redis::cmd("ENQUEUE");
        cmd.arg(copy.id.as_str());
        let value = copy
            .node
            .query("ENQUEUE", &cmd, self.shared.config.command_timeout)
            .await?;
        Ok(as_u64(&value) == Some(1))
    }

    /// Moves a waiting job's due time to `at` (the node's clock): a copy
    /// added with `DELAY` (whole seconds, rounded up: due at `at` or up to
    /// a second later, never before), then the old one cancelled.
    pub(super) async fn reschedule_found(
        &self,
        topic: &Topic,
        id: &JobId,
        found: Found,
        at: SystemTime,
    ) -> Result<bool> {
        let give_up = Instant::now() + BUDGET;
        let at_ms = at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut found = found;
        let mut came_due = false;
        loop {
            found = self.reread(&found).await?;
            let Some(target) = self
                .waiting_target(topic, id, &found, give_up, &mut came_due)
                .await?
            else {
                return Ok(false);
            };
            let Some(target) = target else { continue };
            let Some(judge) = target.judge() else {
                continue;
            };
            let elapsed = u64::try_from(judge.clock.sent.elapsed().as_millis()).unwrap_or(u64::MAX);
            if at_ms <= judge.clock.server_ms.saturating_add(elapsed) {
                if self.enqueue_waiting(&target).await? {
                    return Ok(true);
                }
                continue;
            }
            // From the read's clock: the ADDJOB runs later, so the copy is
            // due at `at` or after.
            let delay = Duration::from_secs(ceil_secs(Duration::from_millis(
                at_ms - judge.clock.server_ms,
            )));
            let Some(stored) = rescheduled_body(&target, topic, id, at_ms) else {
                continue;
            };
            let mut disque = DisquePushOptions::new();
            disque = if judge.retry_s == 0 {
                disque.with_at_most_once(true)
            } else {
                disque
                    .with_retry(Duration::from_secs(judge.retry_s))
                    .with_replicate(judge.repl.max(1))
            };
            let mut options = PushOptions::new()
                .with_delay(delay)
                .with_backend_options(disque);
            if judge.ttl_s > delay.as_secs() {
                options = options.with_ttl(Duration::from_secs(judge.ttl_s));
            }
            let copy = self.add(topic, stored, &options).await?;
            let old = Found {
                jobs: vec![target.clone()],
            };
            if self.cancel_found(topic, id, old).await? == Cancelled::Removed {
                let attempt = target.job(topic).map(|(j, _)| j.attempt());
                tracing::debug!(topic = %topic, message_id = %id, ?attempt, delay_s = delay.as_secs(), "job rescheduled");
                return Ok(true);
            }
            // It came due meanwhile: take the copy back.
            let new = Found {
                jobs: vec![DisqueJob {
                    id: copy,
                    copies: Vec::new(),
                }],
            };
            return match self.cancel_found(topic, id, new).await? {
                Cancelled::Removed | Cancelled::NotFound => Ok(false),
                _ => Err(control(
                    topic,
                    id,
                    "the job came due while it was rescheduled and its copy is running too: it may run twice",
                    false,
                )),
            };
        }
    }
}

/// The stored body of a rescheduled copy: the same headers (the id kept,
/// the next attempt, the new run-at time) and body.
fn rescheduled_body(job: &DisqueJob, topic: &Topic, id: &JobId, at_ms: u64) -> Option<Bytes> {
    let (current, mut headers) = job.job(topic)?;
    if headers.get(MESSAGE_ID_HEADER).is_none() {
        headers.insert(MESSAGE_ID_HEADER, id.as_str());
    }
    if current.attempt() > 1 {
        headers.insert(ATTEMPT_HEADER, current.attempt().to_string());
    }
    headers.insert(RUN_AT_HEADER, at_ms.to_string());
    Some(envelope::encode(&headers, current.body()))
}

fn control(topic: &Topic, id: &JobId, reason: &'static str, retryable: bool) -> Error {
    DisqueError::JobControl {
        topic: topic.as_str().to_owned(),
        job: id.as_str().to_owned(),
        reason,
        retryable,
    }
    .into()
}
