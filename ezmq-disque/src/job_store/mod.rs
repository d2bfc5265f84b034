//! The job store on Disque ([`JobStore`]): jobs found by their ezmq id and
//! state, cancelled, promoted and rescheduled.
//!
//! # Where a job is
//!
//! Disque keeps no index by ezmq id (it is in the body's envelope), so
//! every call scans: `JSCAN ... QUEUE <topic> REPLY all` on every node,
//! each envelope decoded. Disque's own states map as follows:
//!
//! * `queued` on any node: [`JobState::Ready`];
//! * `active` and never queued (a delayed `ADDJOB`, or the copy a retry
//!   re-added with `DELAY`): [`JobState::Scheduled`], or
//!   [`JobState::Retrying`] when its next attempt is past the first; due
//!   at its queue time (`TIME` + `next-requeue-within`, the node's clock);
//! * `active` after a queueing: [`JobState::Running`] (delivered, not
//!   acknowledged). A retry shorter than a second (the listener waits,
//!   then `NACK`s) is running until it is queued again;
//! * `acked`: finished, not found.
//!
//! Whether an active job was ever queued is read from its queue time on
//! the node that created it (see `copy.rs`); a job whose creating node is
//! gone is taken as running, which cancels nothing it should not.
//!
//! # Cost
//!
//! O(jobs on each node) per call, on every node: `JSCAN` walks a node's
//! whole job table (its `QUEUE` filter only trims the reply), page by
//! page. Concurrent calls on a topic share scans (at most one running and
//! one waiting), so a burst of cancels costs two scans. Meant for
//! inspection and the occasional cancel, not a hot path; pushes cost
//! nothing more.
//!
//! # Guarantees
//!
//! A cancel that says [`Cancelled::Removed`] leaves a job no consumer got
//! and none will get; one a consumer got first is reported running and
//! left alone. Disque has no conditional delete, so (see `act.rs`) a
//! queued job is taken out with `DEQUEUE`, atomic with `GETJOB` on its
//! node, and a job waiting for its time is acted on only while every node
//! is at least 250 ms from queueing it (closer, the call waits until it is
//! queued or delivered): the promise rests on the following `ACKJOB`
//! reaching the nodes within that time. Promote (`ENQUEUE`) and
//! reschedule (a copy with the new `DELAY` and the same headers, then the
//! old one cancelled as above) follow the same rule, so a promoted job is
//! never delivered twice and a rescheduled one is never early nor run
//! twice. Delays are whole seconds: a rescheduled job is due at the asked
//! time or up to a second after it.

mod act;
mod copy;
mod scan;
mod view;

use std::time::SystemTime;

use async_trait::async_trait;
use ezmq_core::spi::{Cancelled, JobInfo, JobState, JobStore};
use ezmq_core::{JobId, Result, Topic};

use crate::backend::DisqueBackend;

pub(crate) use scan::ScanBoard;
use view::Found;

impl DisqueBackend {
    /// The Disque jobs carrying ezmq id `id` in `topic`, from a fresh scan.
    async fn find(&self, topic: &Topic, id: &JobId) -> Result<Option<Found>> {
        Ok(self.scan_topic(topic).await?.get(id).cloned())
    }

    /// Every job of `topic` as it stands, by id.
    async fn infos(&self, topic: &Topic) -> Result<Vec<JobInfo>> {
        Ok(self
            .scan_topic(topic)
            .await?
            .values()
            .filter_map(|found| found.info(topic))
            .collect())
    }
}

#[async_trait]
impl JobStore for DisqueBackend {
    /// One scan of every node (see the module docs of `job_store`).
    async fn job(&self, topic: &Topic, id: &JobId) -> Result<Option<JobInfo>> {
        Ok(self
            .find(topic, id)
            .await?
            .and_then(|found| found.info(topic)))
    }

    /// One scan of every node, then sorted by id.
    async fn jobs(
        &self,
        topic: &Topic,
        state: JobState,
        after: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<JobInfo>> {
        Ok(self
            .infos(topic)
            .await?
            .into_iter()
            .filter(|info| info.state == state && after.is_none_or(|a| info.job.id() > a))
            .take(limit)
            .collect())
    }

    /// One scan of every node.
    async fn count(&self, topic: &Topic, state: JobState) -> Result<u64> {
        let n = self
            .infos(topic)
            .await?
            .iter()
            .filter(|info| info.state == state)
            .count();
        Ok(u64::try_from(n).unwrap_or(u64::MAX))
    }

    /// A scan, then `DEQUEUE` / `ACKJOB` as the module docs of `job_store` say.
    async fn cancel(&self, topic: &Topic, id: &JobId) -> Result<Cancelled> {
        match self.find(topic, id).await? {
            Some(found) => self.cancel_found(topic, id, found).await,
            None => Ok(Cancelled::NotFound),
        }
    }

    /// A scan, then `ENQUEUE` of the waiting copy.
    async fn promote(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        match self.find(topic, id).await? {
            Some(found) => self.promote_found(topic, id, found).await,
            None => Ok(false),
        }
    }

    /// A scan, then a copy added with the new `DELAY` and the old one
    /// cancelled; a time past or now promotes it.
    async fn reschedule(&self, topic: &Topic, id: &JobId, at: SystemTime) -> Result<bool> {
        match self.find(topic, id).await? {
            Some(found) => self.reschedule_found(topic, id, found, at).await,
            None => Ok(false),
        }
    }
}
