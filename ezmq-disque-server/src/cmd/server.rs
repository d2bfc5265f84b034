//! HELLO, INFO, PING, AUTH.

use super::{arity_error, syntax_error, Outcome, Session};
use crate::frame::Frame;
use crate::parse::Parse;
use crate::persist::rewrite::{self, NotStarted};
use crate::settings::AuthError;
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
            Frame::bulk_static(if node.settings.leaving.load(Ordering::Relaxed) {
                "100"
            } else {
                "1"
            }),
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
pub(crate) fn auth(node: &Node, sess: &mut Session, args: &[Bytes]) -> Outcome {
    Outcome::Reply(match node.auth.check(&args[0]) {
        Ok(epoch) => {
            sess.auth_epoch = Some(epoch);
            Frame::status("OK")
        }
        Err(AuthError::NoPassword) => Frame::error("ERR Client sent AUTH, but no password is set"),
        Err(AuthError::Invalid) => {
            sess.auth_epoch = None;
            Frame::error("ERR invalid password")
        }
    })
}

/// `INFO [section]`: Server, Clients, Memory, Jobs, Queues, Persistence,
/// Stats and CPU by default; `all` adds Commandstats.
pub(crate) fn info(node: &Node, args: &[Bytes]) -> Frame {
    if args.len() > 1 {
        return syntax_error();
    }
    let section = args
        .first()
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .unwrap_or_else(|| "default".to_string());
    let default = section == "default" || section == "all";
    let want = |name: &str| default || section == name;
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
    let begin = |out: &mut String, name: &str| {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {name}\r\n");
    };
    let uptime = now_s().saturating_sub(node.started_s);
    if want("server") {
        begin(&mut out, "Server");
        let _ = write!(
            out,
            "disque_version:{DISQUE_VERSION}\r\nezmq_version:{}\r\ndisque_mode:{}\r\nos:{} {}\r\n\
             arch_bits:{}\r\nmultiplexing_api:tokio\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\n\
             uptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfig_file:\r\n",
            env!("CARGO_PKG_VERSION"),
            if node.link.is_some() { "cluster" } else { "standalone" },
            std::env::consts::OS,
            std::env::consts::ARCH,
            usize::BITS,
            std::process::id(),
            node.id,
            node.port,
            uptime / 86400,
            node.settings.hz.load(Ordering::Relaxed),
        );
    }
    if want("clients") {
        begin(&mut out, "Clients");
        let _ = write!(
            out,
            "connected_clients:{}\r\nclient_longest_output_list:0\r\nclient_biggest_input_buf:0\r\n\
             blocked_clients:{blocked}\r\n",
            node.connected_clients.load(Ordering::Relaxed)
        );
    }
    if want("memory") {
        begin(&mut out, "Memory");
        let rss = rss_bytes();
        let used = mem + node.query_budget.used();
        let peak = node
            .stats
            .peak_memory
            .fetch_max(used, Ordering::Relaxed)
            .max(used);
        let _ = write!(
            out,
            "used_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\n\
             used_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_jobs:{mem}\r\n\
             mem_clients_normal:{}\r\nmaxmemory_clients:{}\r\nmaxmemory:{}\r\n\
             maxmemory_human:{}\r\nmaxmemory_policy:noeviction\r\nmem_allocator:system\r\n",
            human(used),
            human(peak),
            node.query_budget.used(),
            node.query_budget.max(),
            node.max_memory,
            human(node.max_memory),
        );
    }
    if want("jobs") {
        begin(&mut out, "Jobs");
        let _ = write!(out, "registered_jobs:{jobs}\r\n");
    }
    if want("queues") {
        begin(&mut out, "Queues");
        let _ = write!(out, "registered_queues:{queues}\r\n");
    }
    if want("persistence") {
        begin(&mut out, "Persistence");
        persistence_info(node, &mut out);
    }
    if want("stats") {
        begin(&mut out, "Stats");
        let st = &node.stats;
        let _ = write!(
            out,
            "total_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             rejected_connections:{}\r\n",
            st.connections_received.load(Ordering::Relaxed),
            st.commands_processed.load(Ordering::Relaxed),
            st.rejected_connections.load(Ordering::Relaxed),
        );
    }
    if want("cpu") {
        begin(&mut out, "CPU");
        let (user, sys) = cpu_seconds();
        let _ = write!(
            out,
            "used_cpu_sys:{sys:.2}\r\nused_cpu_user:{user:.2}\r\nused_cpu_sys_children:0.00\r\n\
             used_cpu_user_children:0.00\r\n"
        );
    }
    if section == "all" || section == "commandstats" {
        begin(&mut out, "Commandstats");
        for (name, calls, usec) in node.stats.per_command() {
            let per = usec as f64 / calls.max(1) as f64;
            let _ = write!(
                out,
                "cmdstat_{name}:calls={calls},usec={usec},usec_per_call={per:.2}\r\n"
            );
        }
    }
    Frame::Bulk(Bytes::from(out))
}

/// Bytes in Redis' human form (`946.61K`).
fn human(n: usize) -> String {
    const UNITS: [&str; 5] = ["K", "M", "G", "T", "P"];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2}{}", UNITS[u])
}

/// Resident set size of this process (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// User and system CPU seconds of this process (Linux; 0 elsewhere).
fn cpu_seconds() -> (f64, f64) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (0.0, 0.0);
    };
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (tick(11), tick(12))
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
        aof.policy(),
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
