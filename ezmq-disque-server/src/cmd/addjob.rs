//! ADDJOB.

use super::{is, parse_timeout, syntax_error, Outcome, Session};
use crate::cluster::replication::add_replicated;
use crate::frame::Frame;
use crate::parse::parse_i64;
use crate::state::{now, Node};
use bytes::Bytes;
use std::sync::atomic::Ordering;

/// Default TTL: one day.
const DEFAULT_TTL: i64 = 24 * 3600;
/// Upper bound of the default retry.
const DEFAULT_RETRY_MAX: i64 = 300;

/// `ADDJOB queue body ms-timeout [REPLICATE n] [DELAY s] [RETRY s] [TTL s] [MAXLEN n] [ASYNC]`
pub(crate) fn addjob(node: &Node, _sess: &mut Session, args: &[Bytes]) -> Outcome {
    match addjob_inner(node, args) {
        Ok(outcome) => outcome,
        Err(frame) => Outcome::Reply(frame),
    }
}

fn addjob_inner(node: &Node, args: &[Bytes]) -> Result<Outcome, Frame> {
    let (queue, body, timeout) = (&args[0], &args[1], &args[2]);
    // Cluster size and the other nodes this one can replicate to right now
    // (reachable and not leaving).
    let (cluster_size, reachable_nodes) = match &node.link {
        Some(link) => (
            link.bus.size() as i64,
            link.bus.replication_peers(link.me).len() as i64,
        ),
        None => (1, 0),
    };
    let leaving = node.settings.leaving.load(Ordering::Relaxed);
    let mut replicate: i64 = cluster_size.min(3);
    let mut sync = true;
    let mut ttl = DEFAULT_TTL;
    let mut retry: i64 = -1;
    let mut delay: i64 = 0;
    let mut maxlen: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let opt = &args[j][..];
        let has_val = j + 1 < args.len();
        let val = if has_val {
            parse_i64(&args[j + 1])
        } else {
            None
        };
        if is(opt, "replicate") && has_val {
            match val {
                Some(v) if (1..=65535).contains(&v) => replicate = v,
                _ => return Err(Frame::error("ERR REPLICATE must be between 1 and 65535")),
            }
            j += 1;
        } else if is(opt, "ttl") && has_val {
            match val {
                Some(v) if v > 0 => ttl = v,
                _ => return Err(Frame::error("ERR TTL must be a number > 0")),
            }
            j += 1;
        } else if is(opt, "retry") && has_val {
            match val {
                Some(v) if v >= 0 => retry = v,
                _ => return Err(Frame::error("ERR RETRY time must be a non negative number")),
            }
            j += 1;
        } else if is(opt, "delay") && has_val {
            match val {
                Some(v) if v >= 0 => delay = v,
                _ => return Err(Frame::error("ERR DELAY time must be a non negative number")),
            }
            j += 1;
        } else if is(opt, "maxlen") && has_val {
            match val {
                Some(v) if v > 0 => maxlen = v,
                _ => return Err(Frame::error("ERR MAXLEN must be a positive number")),
            }
            j += 1;
        } else if is(opt, "async") {
            sync = false;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    let timeout_ms = parse_timeout(timeout)?;
    if replicate > 1 && retry == 0 {
        return Err(Frame::error(
            "ERR With RETRY set to 0 please explicitly set  REPLICATE to 1 (at-most-once delivery)",
        ));
    }
    if delay >= ttl {
        return Err(Frame::error(
            "ERR The specified DELAY is greater than TTL. Job refused since would never be delivered",
        ));
    }
    if retry == -1 {
        retry = (ttl / 10).clamp(1, DEFAULT_RETRY_MAX);
    }
    // A leaving node stores new jobs only on other nodes (Disque's external
    // replication): it needs `replicate` of them.
    if leaving && (node.link.is_none() || replicate > reachable_nodes) {
        return Err(Frame::error(
            "NOREPL Not enough reachable nodes for the requested replication level, I'm leaving the cluster",
        ));
    }
    if replicate - 1 > reachable_nodes {
        return Err(Frame::error(
            "NOREPL Not enough reachable nodes for the requested replication level",
        ));
    }
    // Keep the arithmetic on times in range.
    let ttl = ttl.min(i64::from(u32::MAX));
    let delay = delay.min(ttl);
    let retry = retry.min(i64::from(u32::MAX));
    let now = now();
    let mut store = node.store();
    if let Some(q) = store.queues.get(queue) {
        if maxlen > 0 && q.len() as i64 >= maxlen {
            return Err(Frame::error(
                "MAXLEN Queue is already longer than the specified MAXLEN count",
            ));
        }
        if q.paused_in {
            return Err(Frame::error("PAUSED Queue paused in input, try later"));
        }
    }
    if node.max_memory > 0 && store.used_memory + body.len() + queue.len() > node.max_memory {
        return Err(Frame::error(
            "OOM command not allowed when used memory > 'maxmemory'",
        ));
    }
    if replicate > 1 || leaving {
        let job = store.build_job(
            queue.clone(),
            crate::body::Body::copy_from(body),
            replicate as u16,
            ttl,
            retry,
            delay,
            now,
        );
        return Ok(add_replicated(
            &mut store, job, sync, timeout_ms, now, leaving,
        ));
    }
    let id = store.add_job(
        queue.clone(),
        crate::body::Body::copy_from(body),
        replicate as u16,
        ttl,
        retry,
        delay,
        now,
    );
    if let Some(link) = &node.link {
        if let Some(job) = store.jobs.get_mut(&id) {
            job.nodes = vec![link.me].into();
        }
    }
    drop(store);
    Ok(Outcome::Reply(Frame::Status(id.to_bytes())))
}
