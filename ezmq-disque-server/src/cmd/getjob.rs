//! GETJOB.

use super::{is, parse_timeout, syntax_error, Blocked, Outcome, Session};
use crate::frame::Frame;
use crate::parse::parse_i64;
use crate::state::{now, Node};
use crate::waiters::Waiter;
use bytes::Bytes;
use tokio::sync::oneshot;

/// `GETJOB [NOHANG] [TIMEOUT ms] [COUNT n] [WITHCOUNTERS] FROM q1 q2 ...`
pub(crate) fn getjob(node: &Node, _sess: &mut Session, args: &[Bytes]) -> Outcome {
    let mut timeout: u64 = 0;
    let mut count: i64 = 1;
    let mut nohang = false;
    let mut withcounters = false;
    let mut queues: Option<&[Bytes]> = None;
    let mut j = 0;
    while j < args.len() {
        let opt = &args[j][..];
        let lastarg = j + 1 == args.len();
        if is(opt, "nohang") {
            nohang = true;
        } else if is(opt, "withcounters") {
            withcounters = true;
        } else if is(opt, "timeout") && !lastarg {
            match parse_timeout(&args[j + 1]) {
                Ok(t) => timeout = t,
                Err(e) => return Outcome::Reply(e),
            }
            j += 1;
        } else if is(opt, "count") && !lastarg {
            match parse_i64(&args[j + 1]) {
                Some(n) if n > 0 => count = n,
                _ => {
                    return Outcome::Reply(Frame::error(
                        "ERR COUNT must be a number greater than zero",
                    ))
                }
            }
            j += 1;
        } else if is(opt, "from") {
            queues = Some(&args[j + 1..]);
            break;
        } else {
            return Outcome::Reply(syntax_error());
        }
        j += 1;
    }
    let queues = match queues {
        Some(q) if !q.is_empty() => q,
        _ => return Outcome::Reply(syntax_error()),
    };
    let now = now();
    let mut store = node.store();
    for q in queues {
        store.queue_mut(q);
    }
    let mut out: Vec<Frame> = Vec::new();
    let count = count as usize;
    'passes: loop {
        let before = out.len();
        for q in queues {
            if let Some(entry) = store.fetch_entry(q, now, withcounters) {
                out.push(entry);
                if out.len() >= count {
                    break 'passes;
                }
            }
        }
        if out.len() == before {
            break;
        }
    }
    if !out.is_empty() {
        return Outcome::Reply(Frame::Array(out));
    }
    if node.link.is_some() {
        // Ask the other nodes for jobs of these queues (federation).
        store.need_jobs(queues);
    }
    if nohang {
        return Outcome::Reply(Frame::NullArray);
    }
    if node
        .settings
        .leaving
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        return Outcome::Reply(Frame::error(
            "LEAVING This node is leaving the cluster, please connect to a different one",
        ));
    }
    let (tx, rx) = oneshot::channel();
    let wid = store.add_waiter(Waiter {
        queues: queues.to_vec(),
        withcounters,
        tx,
    });
    Outcome::Block(Blocked {
        wid,
        rx,
        timeout_ms: timeout,
    })
}
