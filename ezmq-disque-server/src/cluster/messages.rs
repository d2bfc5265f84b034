//! Node-to-node messages (the subset of Disque's cluster bus we need).

use crate::job::{Job, JobId, JobState};
use bytes::Bytes;

/// A message between two nodes of an embedded cluster.
#[derive(Debug)]
pub(crate) enum Msg {
    /// Store a copy of this job (Disque `REPLJOB`); answered with `GotJob`
    /// unless the queue is paused in input here.
    ReplJob(Box<JobData>),
    /// The sender stored its copy (Disque `GOTJOB`).
    GotJob(JobId),
    /// The job was acknowledged: drop it (Disque `SETACK`).
    SetAck(JobId),
    /// The sender dropped its copy after a `SetAck` (Disque `GOTACK`).
    GotAck(JobId),
    /// Drop the job, no answer (Disque `DELJOB`, used by FASTACK).
    DelJob(JobId),
    /// The sender queued the job (Disque `QUEUED`): postpone the local
    /// requeue and take the counters.
    Queued {
        id: JobId,
        nacks: u32,
        deliveries: u32,
    },
    /// The sender is about to requeue the job (Disque `WILLQUEUE`): answer
    /// `Queued` if it is queued here.
    WillQueue(JobId),
    /// A client is working on the job (Disque `WORKING`): dequeue it and
    /// postpone the requeue.
    Working(JobId),
    /// A client blocks on this queue at the sender (Disque `NEEDJOBS`).
    NeedJobs { queue: Bytes, count: usize },
    /// Jobs moved to the sender of `NeedJobs` (Disque `YOURJOBS`).
    YourJobs(Vec<JobData>),
    /// Queue this job now (Disque `QUEUEJOB`): sent by a leaving node to one
    /// of the nodes holding a job it added but keeps no copy of.
    QueueJob(JobId),
    /// Set the pause state of a queue (Disque `PAUSE`, from `PAUSE ... BCAST`).
    Pause {
        queue: Bytes,
        pin: bool,
        pout: bool,
        update: bool,
    },
}

/// A job as sent between nodes. Times are absolute: all nodes share the
/// process clock.
#[derive(Debug, Clone)]
pub(crate) struct JobData {
    pub(crate) id: JobId,
    pub(crate) queue: Bytes,
    pub(crate) body: Bytes,
    pub(crate) repl: u16,
    pub(crate) ctime: u64,
    pub(crate) etime: u64,
    pub(crate) delay: u32,
    pub(crate) retry: u32,
    pub(crate) qtime: u64,
    pub(crate) nacks: u32,
    pub(crate) deliveries: u32,
    pub(crate) nodes: Vec<u16>,
}

impl JobData {
    /// The transferable part of a job.
    pub(crate) fn of(job: &Job) -> JobData {
        JobData {
            id: job.id,
            queue: Bytes::copy_from_slice(&job.queue),
            body: job.body.to_bytes(),
            repl: job.repl,
            ctime: job.ctime,
            etime: job.etime,
            delay: job.delay,
            retry: job.retry,
            qtime: job.qtime,
            nacks: job.nacks,
            deliveries: job.deliveries,
            nodes: job.nodes.to_vec(),
        }
    }

    /// A local `active` copy of the job, held by node `me`.
    pub(crate) fn into_job(self, me: u16, qtime: u64, queued_before: bool) -> Job {
        let mut nodes = self.nodes;
        if !nodes.contains(&me) {
            nodes.push(me);
        }
        Job {
            id: self.id,
            queue: crate::job::QName::from(&self.queue[..]),
            body: crate::body::Body::from_bytes(self.body),
            state: JobState::Active,
            repl: self.repl,
            ctime: self.ctime,
            etime: self.etime,
            delay: self.delay,
            retry: self.retry,
            qtime,
            nacks: self.nacks,
            deliveries: self.deliveries,
            delivered: false,
            queued_before,
            timer: 0,
            nodes: nodes.into(),
            dummy: false,
            willqueue: false,
        }
    }
}

/// Adds every node of `from` missing in `into`.
pub(crate) fn merge_nodes(into: &mut Vec<u16>, from: &[u16]) {
    for n in from {
        if !into.contains(n) {
            into.push(*n);
        }
    }
}
