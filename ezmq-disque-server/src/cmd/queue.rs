//! QLEN, QPEEK, QSTAT, PAUSE.

use super::{is, not_int, syntax_error};
use crate::cluster::messages::Msg;
use crate::frame::Frame;
use crate::parse::Parse;
use crate::queue::pause_name;
use crate::state::{now, Node, Store};
use crate::timers::now_s;
use bytes::Bytes;

/// `QLEN queue`.
pub(crate) fn qlen(node: &Node, args: &[Bytes]) -> Frame {
    let store = node.store();
    Frame::Integer(store.queues.get(&args[0]).map_or(0, |q| q.len() as i64))
}

/// `QPEEK queue count`: oldest first, or newest first when negative.
pub(crate) fn qpeek(node: &Node, args: &[Bytes]) -> Frame {
    let mut p = Parse::new(args);
    let (Some(name), Some(count)) = (p.next_bytes(), p.next_int()) else {
        return not_int();
    };
    let Some(count) = count else {
        return not_int();
    };
    if !p.finish() {
        return syntax_error();
    }
    let store = node.store();
    let Some(q) = store.queues.get(name) else {
        return Frame::Array(vec![]);
    };
    let n = count.unsigned_abs().min(q.len() as u64) as usize;
    let pick = |k: &crate::jobtable::Key| {
        store.job_entry(&store.jobs.id_at(crate::jobtable::key_slot(k)), false)
    };
    let out: Vec<Frame> = if count >= 0 {
        q.jobs.iter().take(n).map(pick).collect()
    } else {
        q.jobs.iter().rev().take(n).map(pick).collect()
    };
    Frame::Array(out)
}

/// `QSTAT queue`.
pub(crate) fn qstat(node: &Node, args: &[Bytes]) -> Frame {
    let store = node.store();
    let Some(q) = store.queues.get(&args[0]) else {
        return Frame::NullArray;
    };
    let now = now_s();
    Frame::Array(vec![
        Frame::bulk_static("name"),
        Frame::Bulk(q.name.clone()),
        Frame::bulk_static("len"),
        Frame::Integer(q.len() as i64),
        Frame::bulk_static("age"),
        Frame::Integer(now.saturating_sub(q.ctime) as i64),
        Frame::bulk_static("idle"),
        Frame::Integer(now.saturating_sub(q.atime) as i64),
        Frame::bulk_static("blocked"),
        Frame::Integer(q.blocked.len() as i64),
        Frame::bulk_static("import-from"),
        Frame::Array(import_from(node, &q.import_from)),
        Frame::bulk_static("import-rate"),
        Frame::Integer(i64::from(q.import_rate(now))),
        Frame::bulk_static("jobs-in"),
        Frame::Integer(q.jobs_in as i64),
        Frame::bulk_static("jobs-out"),
        Frame::Integer(q.jobs_out as i64),
        Frame::bulk_static("pause"),
        Frame::bulk_static(q.pause_name()),
    ])
}

fn import_from(node: &Node, from: &[u16]) -> Vec<Frame> {
    let Some(link) = &node.link else {
        return Vec::new();
    };
    from.iter()
        .map(|&n| Frame::Bulk(Bytes::from(link.bus.id(n))))
        .collect()
}

/// `PAUSE queue option ...` with options in/out/all/none/state/bcast.
pub(crate) fn pause(node: &Node, args: &[Bytes]) -> Frame {
    let qname = &args[0];
    let (mut pin, mut pout, mut update, mut bcast) = (false, false, false, false);
    for opt in &args[1..] {
        if is(opt, "none") {
            pin = false;
            pout = false;
            update = true;
        } else if is(opt, "in") {
            pin = true;
            update = true;
        } else if is(opt, "out") {
            pout = true;
            update = true;
        } else if is(opt, "all") {
            pin = true;
            pout = true;
            update = true;
        } else if is(opt, "bcast") {
            bcast = true;
        } else if is(opt, "state") {
            // Only reports the state.
        } else {
            return syntax_error();
        }
    }
    let mut store = node.store();
    let state = store.apply_pause(qname, pin, pout, update, now());
    if bcast {
        if let Some(link) = &node.link {
            // The other nodes get this node's resulting state.
            let (pin, pout) = match state {
                "in" => (true, false),
                "out" => (false, true),
                "all" => (true, true),
                _ => (false, false),
            };
            let queue = Bytes::copy_from_slice(qname);
            link.broadcast(|| Msg::Pause {
                queue: queue.clone(),
                pin,
                pout,
                update: true,
            });
        }
    }
    Frame::Status(Bytes::from_static(state.as_bytes()))
}

impl Store {
    /// Sets the pause state of a queue (when `update`) and returns it.
    /// `PAUSE q none` on an unknown queue does not create it.
    pub(crate) fn apply_pause(
        &mut self,
        qname: &Bytes,
        pin: bool,
        pout: bool,
        update: bool,
        now: u64,
    ) -> &'static str {
        let exists = self.queues.contains_key(qname);
        if update && (exists || pin || pout) {
            let q = self.queue_mut(qname);
            let was_out = q.paused_out;
            q.paused_in = pin;
            q.paused_out = pout;
            let name = q.name.clone();
            if was_out && !pout {
                self.serve_waiters(&name, now);
            }
            pause_name(pin, pout)
        } else {
            self.queues.get(qname).map_or("none", |q| q.pause_name())
        }
    }
}
