//! One node's copy of a Disque job, as `SHOW` and `JSCAN ... REPLY all`
//! describe it, and what that copy says about where the job is.
//!
//! Disque reports `queued`, `active` (delayed, delivered or dequeued),
//! `acked` and `wait-repl`; it does not say whether an active job was ever
//! delivered. Its queue time does: a job added with `DELAY d` keeps the
//! queue time `ADDJOB` gave it (`ctime + d`) until it is first queued,
//! after which every queueing sets it to `now + RETRY` (±250 ms) — at
//! least 750 ms past `ctime + d`, as ezmq's retry is at least a second. A
//! copy whose queue time is within [`SIGNATURE_TOLERANCE_MS`] of
//! `ctime + delay` has never been queued: it is waiting for its delay.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ezmq_core::JobId;
use redis::Value;
use tokio::time::Instant;

use crate::node::{as_string, as_u64, Node};

/// How far from `ctime + delay` the queue time of a never-queued copy may
/// be: the node's own lateness (its job timer runs every 100 ms) is well
/// under it, a queueing's `RETRY - 250 ms` well over it.
pub(super) const SIGNATURE_TOLERANCE_MS: u64 = 375;

/// Disque's state of one copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DisqueState {
    /// A synchronous `ADDJOB` waits for its replicas.
    WaitRepl,
    /// Not in the queue: delayed, delivered, or taken out of it.
    Active,
    /// In the queue: the next `GETJOB` may take it.
    Queued,
    /// Acknowledged: done, being garbage collected.
    Acked,
}

impl DisqueState {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "wait-repl" => DisqueState::WaitRepl,
            "active" => DisqueState::Active,
            "queued" => DisqueState::Queued,
            "acked" => DisqueState::Acked,
            _ => return None,
        })
    }
}

/// Where a copy says its job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Its `ADDJOB` is still replicating.
    Adding,
    /// Queued.
    Ready,
    /// Never queued, due at `due_ms` (the node's clock, ms since the epoch).
    Waiting {
        /// When the node queues it.
        due_ms: u64,
    },
    /// Active after a queueing: delivered to a consumer (running).
    Delivered,
    /// Acknowledged.
    Finished,
}

/// When a reply was read.
#[derive(Clone, Copy, Debug)]
pub(super) struct Clock {
    /// The node's clock (`TIME`, sent next to the read), ms since the epoch.
    pub(super) server_ms: u64,
    /// When the read was sent: the node answered after this instant, so
    /// `sent + next-requeue-within` is never later than its queue time.
    pub(super) sent: Instant,
}

/// One node's copy of a Disque job.
#[derive(Clone, Debug)]
pub(super) struct Copy {
    /// The node holding it.
    pub(super) node: Arc<Node>,
    /// Disque's job id (the same on every node).
    pub(super) id: JobId,
    pub(super) state: DisqueState,
    /// The copies `ADDJOB` asked for (`REPLICATE`).
    pub(super) repl: u32,
    /// Seconds left to live.
    pub(super) ttl_s: u64,
    /// Creation time on the node that added it, ms since the epoch.
    pub(super) ctime_ms: u64,
    pub(super) delay_s: u64,
    pub(super) retry_s: u64,
    pub(super) nacks: u32,
    pub(super) deliveries: u32,
    /// Milliseconds until the node queues it by itself; `None`: never.
    pub(super) requeue_in_ms: Option<u64>,
    /// The stored body (headers enveloped).
    pub(super) body: Bytes,
    pub(super) clock: Clock,
}

impl Copy {
    /// Parses one `SHOW` reply (a flat field/value array); `None` for a
    /// nil reply (no such job on the node), a dummy ACK or a bad shape.
    pub(super) fn parse(node: &Arc<Node>, value: &Value, clock: Clock) -> Option<Copy> {
        let Value::Array(fields) = value else {
            return None;
        };
        let mut copy = Copy {
            node: Arc::clone(node),
            id: JobId::new(""),
            state: DisqueState::Active,
            repl: 1,
            ttl_s: 0,
            ctime_ms: 0,
            delay_s: 0,
            retry_s: 0,
            nacks: 0,
            deliveries: 0,
            requeue_in_ms: None,
            body: Bytes::new(),
            clock,
        };
        let mut has_body = false;
        for pair in fields.chunks_exact(2) {
            let (key, v) = (&pair[0], &pair[1]);
            let small = || as_u64(v).and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
            match as_string(key).as_deref() {
                Some("id") => copy.id = JobId::new(as_string(v)?),
                Some("state") => copy.state = DisqueState::parse(&as_string(v)?)?,
                Some("repl") => copy.repl = small(),
                Some("ttl") => copy.ttl_s = as_u64(v).unwrap_or(0),
                Some("ctime") => copy.ctime_ms = as_u64(v).unwrap_or(0) / 1_000_000,
                Some("delay") => copy.delay_s = as_u64(v).unwrap_or(0),
                Some("retry") => copy.retry_s = as_u64(v).unwrap_or(0),
                Some("nacks") => copy.nacks = small(),
                Some("additional-deliveries") => copy.deliveries = small(),
                Some("next-requeue-within") => copy.requeue_in_ms = as_u64(v),
                Some("body") => {
                    if let Value::BulkString(b) = v {
                        copy.body = Bytes::copy_from_slice(b);
                        has_body = true;
                    }
                }
                _ => {}
            }
        }
        (has_body && !copy.id.as_str().is_empty()).then_some(copy)
    }

    /// What this copy says (see the module docs).
    pub(super) fn phase(&self) -> Phase {
        match self.state {
            DisqueState::WaitRepl => Phase::Adding,
            DisqueState::Queued => Phase::Ready,
            DisqueState::Acked => Phase::Finished,
            DisqueState::Active => match self.requeue_in_ms {
                Some(r) if self.delay_s > 0 => {
                    let due_ms = self.clock.server_ms.saturating_add(r);
                    let planned = self
                        .ctime_ms
                        .saturating_add(self.delay_s.saturating_mul(1000));
                    if due_ms.abs_diff(planned) < SIGNATURE_TOLERANCE_MS {
                        Phase::Waiting { due_ms }
                    } else {
                        Phase::Delivered
                    }
                }
                _ => Phase::Delivered,
            },
        }
    }

    /// The earliest instant this copy's node may queue it by itself (its
    /// timer): now for a copy that is queued or still being added, `None`
    /// for one never queued again (acked, or an at-most-once job).
    pub(super) fn queue_deadline(&self) -> Option<Instant> {
        match self.state {
            DisqueState::Queued | DisqueState::WaitRepl => Some(self.clock.sent),
            DisqueState::Acked => None,
            DisqueState::Active => self
                .requeue_in_ms
                .map(|r| self.clock.sent + Duration::from_millis(r)),
        }
    }

    /// True on the node that created the job (its id names the node):
    /// the copy whose queue time tells whether it was ever queued.
    pub(super) fn on_creator(&self) -> bool {
        self.id
            .as_str()
            .strip_prefix("D-")
            .and_then(|rest| rest.get(..8))
            .is_some_and(|prefix| self.node.info.id.starts_with(prefix))
    }
}

/// Parses a `TIME` reply (`[seconds, microseconds]`) into ms.
pub(super) fn parse_time(value: &Value) -> Option<u64> {
    let Value::Array(parts) = value else {
        return None;
    };
    let secs = parts.first().and_then(as_u64)?;
    let micros = parts.get(1).and_then(as_u64)?;
    Some(secs.saturating_mul(1000).saturating_add(micros / 1000))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::config::DisqueConfig;
    use crate::node::NodeInfo;

    pub(crate) fn node(id: &str) -> Arc<Node> {
        let info = NodeInfo {
            id: id.to_owned(),
            addr: "127.0.0.1:7711".to_owned(),
            priority: 1,
        };
        Arc::new(Node::new(info, &DisqueConfig::default(), 1).unwrap())
    }

    fn show(state: &str, ctime_ms: u64, delay: i64, requeue: Option<i64>) -> Value {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        Value::Array(vec![
            bulk("id"),
            bulk("D-aaaaaaaa-xxxxxxxxxxxxxxxxxxxxxxxx-05a1"),
            bulk("queue"),
            bulk("q"),
            bulk("state"),
            bulk(state),
            bulk("repl"),
            Value::Int(2),
            bulk("ttl"),
            Value::Int(86_000),
            bulk("ctime"),
            Value::Int(i64::try_from(ctime_ms * 1_000_000).unwrap()),
            bulk("delay"),
            Value::Int(delay),
            bulk("retry"),
            Value::Int(30),
            bulk("nacks"),
            Value::Int(1),
            bulk("additional-deliveries"),
            Value::Int(2),
            bulk("nodes-delivered"),
            Value::Array(vec![]),
            bulk("nodes-confirmed"),
            Value::Array(vec![]),
            bulk("next-requeue-within"),
            requeue.map_or(Value::Nil, Value::Int),
            bulk("next-awake-within"),
            Value::Int(0),
            bulk("body"),
            bulk("payload"),
        ])
    }

    fn clock(server_ms: u64) -> Clock {
        Clock {
            server_ms,
            sent: Instant::now(),
        }
    }

    #[test]
    fn parses_show_and_reads_the_queue_time() {
        let n = node("aaaaaaaa1111");
        // Added at 1_000 with DELAY 60, read at 31_000: due at 61_000.
        let waiting =
            Copy::parse(&n, &show("active", 1_000, 60, Some(30_000)), clock(31_000)).unwrap();
        assert_eq!(
            (
                waiting.repl,
                waiting.retry_s,
                waiting.nacks,
                waiting.deliveries
            ),
            (2, 30, 1, 2)
        );
        assert_eq!(&waiting.body[..], b"payload");
        assert_eq!(waiting.phase(), Phase::Waiting { due_ms: 61_000 });
        assert!(waiting.on_creator());
        assert!(waiting.queue_deadline().is_some());
        // Queued at 61_000, delivered: the queue time is now + RETRY.
        let delivered =
            Copy::parse(&n, &show("active", 1_000, 60, Some(29_000)), clock(62_000)).unwrap();
        assert_eq!(delivered.phase(), Phase::Delivered);
        let plain = Copy::parse(&n, &show("active", 1_000, 0, Some(1_000)), clock(2_000)).unwrap();
        assert_eq!(
            plain.phase(),
            Phase::Delivered,
            "no delay: queued at ADDJOB"
        );
        let once = Copy::parse(&n, &show("active", 1_000, 0, None), clock(2_000)).unwrap();
        assert_eq!(
            (once.phase(), once.queue_deadline()),
            (Phase::Delivered, None)
        );
        let queued = Copy::parse(&n, &show("queued", 1_000, 0, Some(1)), clock(2_000)).unwrap();
        assert_eq!(queued.phase(), Phase::Ready);
        let acked = Copy::parse(&n, &show("acked", 1_000, 0, None), clock(2_000)).unwrap();
        assert_eq!(acked.phase(), Phase::Finished);
        assert!(
            !Copy::parse(&node("bbbbbbbb"), &show("queued", 1, 0, None), clock(2))
                .unwrap()
                .on_creator()
        );
        assert!(Copy::parse(&n, &Value::Nil, clock(0)).is_none());
        assert!(Copy::parse(&n, &show("weird", 1, 0, None), clock(0)).is_none());
    }

    #[test]
    fn parses_time() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        assert_eq!(
            parse_time(&Value::Array(vec![bulk("1700000000"), bulk("123456")])),
            Some(1_700_000_000_123)
        );
        assert_eq!(parse_time(&Value::Nil), None);
    }
}
