//! SHOW.

use super::bad_id;
use crate::frame::Frame;
use crate::job::{Job, JobId, JobState};
use crate::state::{now, Node};
use bytes::Bytes;

/// Advance of the internal wake-up before a requeue (Disque WILLQUEUE).
const WILLQUEUE_ADVANCE_MS: u64 = 500;

/// The SHOW reply for a job.
pub(crate) fn job_info(node: &Node, job: &Job, now: u64) -> Frame {
    let ms_until = |t: u64| t.saturating_sub(now) as i64;
    let next_requeue = if job.qtime == 0 {
        Frame::NullBulk
    } else {
        Frame::Integer(ms_until(job.qtime))
    };
    let mut awake = job.etime;
    if job.qtime != 0 && matches!(job.state, JobState::Active | JobState::Queued) {
        let q = if job.retry > 0 {
            job.qtime.saturating_sub(WILLQUEUE_ADVANCE_MS)
        } else {
            job.qtime
        };
        awake = awake.min(q);
    }
    Frame::Array(vec![
        Frame::bulk_static("id"),
        Frame::Bulk(job.id.to_bytes()),
        Frame::bulk_static("queue"),
        if job.dummy {
            Frame::NullBulk
        } else {
            Frame::Bulk(Bytes::copy_from_slice(&job.queue))
        },
        Frame::bulk_static("state"),
        Frame::bulk_static(job.state.name()),
        Frame::bulk_static("repl"),
        Frame::Integer(i64::from(job.repl)),
        Frame::bulk_static("ttl"),
        Frame::Integer((job.etime.saturating_sub(now) as i64 + 500) / 1000),
        Frame::bulk_static("ctime"),
        Frame::Integer(job.ctime as i64),
        Frame::bulk_static("delay"),
        Frame::Integer(job.delay as i64),
        Frame::bulk_static("retry"),
        Frame::Integer(job.retry as i64),
        Frame::bulk_static("nacks"),
        Frame::Integer(job.nacks as i64),
        Frame::bulk_static("additional-deliveries"),
        Frame::Integer(job.deliveries as i64),
        Frame::bulk_static("nodes-delivered"),
        Frame::Array(nodes_delivered(node, job)),
        Frame::bulk_static("nodes-confirmed"),
        Frame::Array(vec![]),
        Frame::bulk_static("next-requeue-within"),
        next_requeue,
        Frame::bulk_static("next-awake-within"),
        Frame::Integer(ms_until(awake)),
        Frame::bulk_static("body"),
        if job.dummy {
            Frame::NullBulk
        } else {
            Frame::Bulk(job.body.to_bytes())
        },
    ])
}

fn nodes_delivered(node: &Node, job: &Job) -> Vec<Frame> {
    match &node.link {
        Some(link) => job
            .nodes
            .iter()
            .map(|&n| Frame::Bulk(Bytes::from(link.bus.id(n))))
            .collect(),
        None => vec![Frame::Bulk(Bytes::copy_from_slice(node.id.as_bytes()))],
    }
}

/// `SHOW id`.
pub(crate) fn show(node: &Node, args: &[Bytes]) -> Frame {
    let Some(id) = JobId::parse(&args[0]) else {
        return bad_id();
    };
    let now = now();
    let store = node.store();
    match store.jobs.get(&id) {
        Some(job) => job_info(node, job, now),
        None => Frame::NullBulk,
    }
}
