//! HELLO, INFO, PING, AUTH.

use super::{arity_error, syntax_error, Session};
use crate::frame::Frame;
use crate::parse::Parse;
use crate::persist::rewrite::{self, NotStarted};
use crate::state::Node;
use crate::timers::now_s;
use bytes::Bytes;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// Version reported by INFO.
pub(crate) const DISQUE_VERSION: &str = "1.0-rc1";

/// `HELLO`: protocol version, own ID, and the known nodes.
pub(crate) fn hello(node: &Node, _args: &[Bytes]) -> Frame {
    let id = Bytes::copy_from_slice(node.id.as_bytes());
    if let Some(link) = &node.link {
        let mut out = vec![Frame::Integer(1), Frame::Bulk(id)];
        for (nid, host, port, prio) in link.bus.hello(link.me) {
            out.push(Frame::Array(vec![
                Frame::Bulk(Bytes::from(nid)),
                Frame::Bulk(Bytes::from(host)),
                Frame::Bulk(Bytes::from(port.to_string())),
                Frame::bulk_static(prio),
            ]));
        }
        return Frame::Array(out);
    }
    Frame::Array(vec![
        Frame::Integer(1),
        Frame::Bulk(id.clone()),
        Frame::Array(vec![
            Frame::Bulk(id),
            Frame::Bulk(Bytes::new()),
            Frame::Bulk(Bytes::from(node.port.to_string())),
            Frame::bulk_static("1"),
        ]),
    ])
}

/// `PING [message]`.
pub(crate) fn ping(_node: &Node, args: &[Bytes]) -> Frame {
    let mut p = Parse::new(args);
    match p.remaining() {
        0 => Frame::status("PONG"),
        1 => p
            .next_bytes()
            .map_or_else(|| arity_error("ping"), |m| Frame::Bulk(m.clone())),
        _ => arity_error("ping"),
    }
}

/// `AUTH password`.
pub(crate) fn auth(node: &Node, sess: &mut Session, args: &[Bytes]) -> Frame {
    let Some(pass) = &node.requirepass else {
        return Frame::error("ERR Client sent AUTH, but no password is set");
    };
    if constant_time_eq(pass.as_bytes(), &args[0]) {
        sess.authed = true;
        Frame::status("OK")
    } else {
        sess.authed = false;
        Frame::error("ERR invalid password")
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `INFO [section]`.
pub(crate) fn info(node: &Node, args: &[Bytes]) -> Frame {
    if args.len() > 1 {
        return syntax_error();
    }
    let section = args
        .first()
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .unwrap_or_else(|| "default".to_string());
    let all = section == "default" || section == "all";
    let (jobs, queues, blocked, mem) = {
        let store = node.store();
        (
            store.jobs.len(),
            store.queues.len(),
            store.waiters.len(),
            store.used_memory,
        )
    };
    let mut out = String::new();
    let mut sections = 0;
    let mut begin = |out: &mut String, name: &str| {
        if sections > 0 {
            out.push_str("\r\n");
        }
        sections += 1;
        let _ = write!(out, "# {name}\r\n");
    };
    if all || section == "server" {
        begin(&mut out, "Server");
        let _ = write!(
            out,
            "disque_version:{DISQUE_VERSION}\r\ndisque_mode:standalone\r\nos:{}\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nrun_id:{}\r\n",
            std::env::consts::OS,
            std::process::id(),
            node.port,
            now_s().saturating_sub(node.started_s),
            node.id,
        );
    }
    if all || section == "clients" {
        begin(&mut out, "Clients");
        let _ = write!(
            out,
            "connected_clients:{}\r\nblocked_clients:{blocked}\r\n",
            node.connected_clients.load(Ordering::Relaxed)
        );
    }
    if all || section == "memory" {
        begin(&mut out, "Memory");
        let _ = write!(
            out,
            "used_memory:{mem}\r\nmaxmemory:{}\r\nmem_clients_normal:{}\r\nmaxmemory_clients:{}\r\n",
            node.max_memory,
            node.query_budget.used(),
            node.query_budget.max(),
        );
    }
    if all || section == "jobs" {
        begin(&mut out, "Jobs");
        let _ = write!(out, "registered_jobs:{jobs}\r\n");
    }
    if all || section == "queues" {
        begin(&mut out, "Queues");
        let _ = write!(out, "registered_queues:{queues}\r\n");
    }
    if all || section == "persistence" {
        begin(&mut out, "Persistence");
        persistence_info(node, &mut out);
    }
    Frame::Bulk(Bytes::from(out))
}

/// `BGREWRITEAOF`: compacts the append-only file in the background.
pub(crate) fn bgrewriteaof(node: &Node, _args: &[Bytes]) -> Frame {
    match rewrite::start(&mut node.store()) {
        Ok(()) => Frame::status("Background append only file rewriting started"),
        Err(NotStarted::InProgress) => {
            Frame::error("ERR Background append only file rewriting already in progress")
        }
        Err(NotStarted::Disabled) => Frame::error("ERR Append only file is not enabled"),
    }
}

/// `LOADJOB`: only read from the append-only file, refused from clients.
pub(crate) fn loadjob(_node: &Node, _args: &[Bytes]) -> Frame {
    Frame::error("ERR LOADJOB is a special command only processed from AOF")
}

/// The fields of `INFO persistence`.
fn persistence_info(node: &Node, out: &mut String) {
    let Some(aof) = &node.aof else {
        out.push_str(
            "loading:0\r\naof_enabled:0\r\naof_state:off\r\naof_rewrite_in_progress:0\r\n\
             aof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:-1\r\n\
             aof_current_rewrite_time_sec:-1\r\naof_last_bgrewrite_status:ok\r\n\
             aof_last_write_status:ok\r\n",
        );
        return;
    };
    let st = &aof.stats;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let flag = |a: &std::sync::atomic::AtomicBool| u8::from(a.load(Ordering::Relaxed));
    let in_progress = st.rewrite_in_progress.load(Ordering::Relaxed);
    let current_rewrite_s = if in_progress {
        (crate::timers::now_ms().saturating_sub(load(&st.rewrite_started_ms)) / 1000) as i64
    } else {
        -1
    };
    let last_rewrite_s = if load(&st.rewrites) > 0 || st.last_rewrite_failed.load(Ordering::Relaxed)
    {
        (load(&st.last_rewrite_ms) / 1000) as i64
    } else {
        -1
    };
    let status = |failed: bool| if failed { "err" } else { "ok" };
    let _ = write!(
        out,
        "loading:0\r\naof_enabled:1\r\naof_state:on\r\naof_fsync:{}\r\n\
         aof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\n\
         aof_last_rewrite_time_sec:{last_rewrite_s}\r\naof_current_rewrite_time_sec:{current_rewrite_s}\r\n\
         aof_last_bgrewrite_status:{}\r\naof_last_write_status:{}\r\n\
         aof_rewrites:{}\r\naof_current_size:{}\r\naof_base_size:{}\r\n\
         aof_pending_rewrite:0\r\naof_buffer_length:{}\r\naof_rewrite_buffer_length:{}\r\n\
         aof_pending_bio_fsync:0\r\naof_delayed_fsync:0\r\n\
         aof_loaded_jobs:{}\r\naof_last_load_dropped_bytes:{}\r\n",
        aof.policy,
        u8::from(in_progress),
        flag(&st.rewrite_scheduled),
        status(st.last_rewrite_failed.load(Ordering::Relaxed)),
        status(st.last_write_failed.load(Ordering::Relaxed)),
        load(&st.rewrites),
        load(&st.current_size),
        load(&st.base_size),
        aof.backlog(),
        aof.lock().diff.as_ref().map_or(0, Vec::len),
        load(&st.loaded_jobs),
        load(&st.dropped_bytes),
    );
}
