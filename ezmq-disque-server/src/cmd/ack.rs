//! ACKJOB, FASTACK, DELJOB, NACK, ENQUEUE, DEQUEUE, WORKING.

use super::{bad_id, parse_ids};
use crate::frame::Frame;
use crate::job::{JobId, JobState};
use crate::state::{now, Node};
use bytes::Bytes;

fn delete_all(node: &Node, args: &[Bytes]) -> Frame {
    let ids = match parse_ids(args) {
        Ok(ids) => ids,
        Err(e) => return e,
    };
    let mut store = node.store();
    let n = ids.iter().filter(|id| store.delete_job(id)).count();
    Frame::Integer(n as i64)
}

/// `ACKJOB id ...`: on a single node the job is deleted at once; in a
/// cluster a replicated job stays `acked` until the other holders confirm.
pub(crate) fn ackjob(node: &Node, args: &[Bytes]) -> Frame {
    if node.link.is_none() {
        return delete_all(node, args);
    }
    let ids = match parse_ids(args) {
        Ok(ids) => ids,
        Err(e) => return e,
    };
    Frame::Integer(node.store().cluster_ack(&ids, now()))
}

/// `FASTACK id ...`: in a cluster every reachable node is told too.
pub(crate) fn fastack(node: &Node, args: &[Bytes]) -> Frame {
    if node.link.is_none() {
        return delete_all(node, args);
    }
    let ids = match parse_ids(args) {
        Ok(ids) => ids,
        Err(e) => return e,
    };
    Frame::Integer(node.store().cluster_fastack(&ids))
}

/// `DELJOB id ...`.
pub(crate) fn deljob(node: &Node, args: &[Bytes]) -> Frame {
    delete_all(node, args)
}

fn requeue(node: &Node, args: &[Bytes], nack: bool) -> Frame {
    let ids = match parse_ids(args) {
        Ok(ids) => ids,
        Err(e) => return e,
    };
    let now = now();
    let mut store = node.store();
    let mut n = 0;
    for id in ids {
        let active = store
            .jobs
            .get(&id)
            .is_some_and(|j| j.state == JobState::Active);
        if active && store.enqueue(id, nack, now) {
            n += 1;
        }
    }
    Frame::Integer(n)
}

/// `NACK id ...`: requeue active jobs at once, counting a NACK.
pub(crate) fn nack(node: &Node, args: &[Bytes]) -> Frame {
    requeue(node, args, true)
}

/// `ENQUEUE id ...`: requeue active jobs at once.
pub(crate) fn enqueue(node: &Node, args: &[Bytes]) -> Frame {
    requeue(node, args, false)
}

/// `DEQUEUE id ...`.
pub(crate) fn dequeue(node: &Node, args: &[Bytes]) -> Frame {
    let ids = match parse_ids(args) {
        Ok(ids) => ids,
        Err(e) => return e,
    };
    let mut store = node.store();
    let n = ids.iter().filter(|id| store.dequeue(id)).count();
    Frame::Integer(n as i64)
}

/// `WORKING id`: postpone the next requeue by the retry period.
pub(crate) fn working(node: &Node, args: &[Bytes]) -> Frame {
    let Some(id) = JobId::parse(&args[0]) else {
        return bad_id();
    };
    let now = now();
    let mut store = node.store();
    let Some(job) = store.jobs.get(&id).filter(|j| !j.dummy) else {
        return Frame::error("NOJOB Job not known in the context of this node.");
    };
    let created = job.ctime / 1_000_000;
    let ttl = job.etime as i64 - created as i64;
    let elapsed = now as i64 - created as i64;
    if ttl > 0 && elapsed > ttl / 2 {
        return Frame::error(
            "TOOLATE Half of job TTL already elapsed, you are no longer allowed to postpone the next delivery.",
        );
    }
    let retry = job.retry;
    store.dequeue(&id);
    if let Some(job) = store.jobs.get_mut(&id) {
        if job.retry != 0 && job.qtime != 0 {
            job.qtime = now + u64::from(job.retry) * 1000;
        }
    }
    store.schedule(id);
    store.log_state(&id);
    if node.link.is_some() {
        store.notify_working(id);
    }
    Frame::Integer(retry as i64)
}
