//! QSCAN and JSCAN.

use super::{is, not_int, syntax_error};
use crate::cmd::show::job_info;
use crate::frame::Frame;
use crate::job::JobState;
use crate::parse::parse_i64;
use crate::state::{now, Node};
use crate::timers::now_s;
use bytes::Bytes;

const DEFAULT_COUNT: i64 = 100;

fn parse_cursor(b: &[u8]) -> Option<u64> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

fn cursor_frame(c: u64) -> Frame {
    Frame::Bulk(Bytes::from(c.to_string()))
}

/// Walks `seq`-ordered entries from `cursor`, bounded like Disque
/// (`count * 10` entries examined, or `count` matches) unless `busyloop`.
/// Returns the next cursor (0 when done).
fn walk<T>(
    entries: impl Iterator<Item = (u64, T)>,
    count: i64,
    busyloop: bool,
    mut visit: impl FnMut(T) -> bool,
) -> u64 {
    let max_iter = count.saturating_mul(10).max(1) as u64;
    let want = count.max(1) as usize;
    let mut examined = 0u64;
    let mut found = 0usize;
    let mut it = entries.peekable();
    while let Some((_, item)) = it.next() {
        examined += 1;
        if visit(item) {
            found += 1;
        }
        if !busyloop && (examined >= max_iter || found >= want) {
            return it.peek().map_or(0, |(seq, _)| *seq);
        }
    }
    0
}

/// `QSCAN [cursor] [COUNT n] [BUSYLOOP] [MINLEN n] [MAXLEN n] [IMPORTRATE r]`
pub(crate) fn qscan(node: &Node, args: &[Bytes]) -> Frame {
    let mut count = DEFAULT_COUNT;
    let mut busyloop = false;
    let (mut minlen, mut maxlen, mut importrate) = (-1i64, -1i64, -1i64);
    let mut cursor: Option<u64> = None;
    let mut j = 0;
    while j < args.len() {
        let opt = &args[j][..];
        let remaining = j + 1 < args.len();
        let slot = if !remaining {
            None
        } else if is(opt, "count") {
            Some(&mut count)
        } else if is(opt, "minlen") {
            Some(&mut minlen)
        } else if is(opt, "maxlen") {
            Some(&mut maxlen)
        } else if is(opt, "importrate") {
            Some(&mut importrate)
        } else {
            None
        };
        if let Some(slot) = slot {
            match parse_i64(&args[j + 1]) {
                Some(n) => *slot = n,
                None => return not_int(),
            }
            j += 1;
        } else if is(opt, "busyloop") {
            busyloop = true;
        } else {
            if cursor.is_some() {
                return syntax_error();
            }
            match parse_cursor(opt) {
                Some(c) => cursor = Some(c),
                None => return Frame::error("ERR invalid cursor or option name"),
            }
        }
        j += 1;
    }
    let store = node.store();
    let mut out = Vec::new();
    let start = cursor.unwrap_or(0);
    let next = walk(
        store.queue_scan.range(start..).map(|(s, n)| (*s, n)),
        count,
        busyloop,
        |name| {
            let Some(q) = store.queues.get(name) else {
                return false;
            };
            let len = q.len() as i64;
            let ok = (minlen == -1 || len >= minlen)
                && (maxlen == -1 || len <= maxlen)
                && (importrate == -1 || i64::from(q.import_rate(now_s())) >= importrate);
            if ok {
                out.push(Frame::Bulk(q.name.clone()));
            }
            ok
        },
    );
    Frame::Array(vec![cursor_frame(next), Frame::Array(out)])
}

/// `JSCAN [cursor] [COUNT n] [BUSYLOOP] [QUEUE q] [STATE s ...] [REPLY id|all]`
pub(crate) fn jscan(node: &Node, args: &[Bytes]) -> Frame {
    let mut count = DEFAULT_COUNT;
    let mut busyloop = false;
    let mut queue: Option<&Bytes> = None;
    let mut states: Vec<JobState> = Vec::new();
    let mut reply_all = false;
    let mut cursor: Option<u64> = None;
    let mut j = 0;
    while j < args.len() {
        let opt = &args[j][..];
        let remaining = j + 1 < args.len();
        if is(opt, "count") && remaining {
            match parse_i64(&args[j + 1]) {
                Some(n) => count = n,
                None => return not_int(),
            }
            j += 1;
        } else if is(opt, "busyloop") {
            busyloop = true;
        } else if is(opt, "queue") && remaining {
            queue = Some(&args[j + 1]);
            j += 1;
        } else if is(opt, "state") && remaining {
            match JobState::from_name(&args[j + 1]) {
                Some(s) => states.push(s),
                None => return Frame::error("ERR Invalid job state name"),
            }
            j += 1;
        } else if is(opt, "reply") && remaining {
            let v = &args[j + 1][..];
            if is(v, "id") {
                reply_all = false;
            } else if is(v, "all") {
                reply_all = true;
            } else {
                return Frame::error("ERR Invalid REPLY type, try ID or ALL");
            }
            j += 1;
        } else {
            if cursor.is_some() {
                return syntax_error();
            }
            match parse_cursor(opt) {
                Some(c) => cursor = Some(c),
                None => return Frame::error("ERR invalid cursor or option name"),
            }
        }
        j += 1;
    }
    let now = now();
    let store = node.store();
    let mut out = Vec::new();
    let start = cursor.unwrap_or(0);
    let next = walk(store.jobs.scan_from(start), count, busyloop, |job| {
        if job.dummy {
            return false;
        }
        if queue.is_some_and(|q| q[..] != job.queue[..]) {
            return false;
        }
        if !states.is_empty() && !states.contains(&job.state) {
            return false;
        }
        out.push(if reply_all {
            job_info(node, job, now)
        } else {
            Frame::Status(job.id.to_bytes())
        });
        true
    });
    Frame::Array(vec![cursor_frame(next), Frame::Array(out)])
}
