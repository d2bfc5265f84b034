//! CLIENT and MONITOR.

use super::table::COMMANDS;
use super::{is, syntax_error, Outcome, Session};
use crate::clients::repr;
use crate::frame::Frame;
use crate::parse::parse_i64;
use crate::state::Node;
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

/// `MONITOR`: the connection receives every command the node runs.
pub(crate) fn monitor(_node: &Node, _sess: &mut Session, _args: &[Bytes]) -> Outcome {
    Outcome::Monitor
}

/// Sends one command to the MONITOR clients:
/// `+<secs>.<usecs> [<addr>] "CMD" "arg" ...`.
pub(crate) fn feed_monitor(node: &Node, sess: &Session, args: &[Bytes]) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let mut line = format!(
        "+{}.{:06} [{}]",
        now.as_secs(),
        now.subsec_micros(),
        sess.client.addr
    )
    .into_bytes();
    for a in args {
        line.push(b' ');
        repr(&mut line, a);
    }
    line.extend_from_slice(b"\r\n");
    let _ = node.clients.monitor.send(Bytes::from(line));
}

/// `CLIENT LIST | KILL addr | KILL ID id | SETNAME name | GETNAME`.
pub(crate) fn client(node: &Node, sess: &mut Session, args: &[Bytes]) -> Outcome {
    Outcome::Reply(client_inner(node, sess, args))
}

fn client_inner(node: &Node, sess: &mut Session, args: &[Bytes]) -> Frame {
    let sub = &args[0];
    if is(sub, "list") && args.len() == 1 {
        let mut out = String::new();
        for c in node.clients.all() {
            let cmd = COMMANDS
                .get(c.last_cmd.load(Ordering::Relaxed))
                .map_or("NULL", |c| c.name);
            out.push_str(&c.list_line(cmd));
            out.push('\n');
        }
        return Frame::Bulk(Bytes::from(out));
    }
    if is(sub, "getname") && args.len() == 1 {
        let name = sess.client.name.lock().unwrap_or_else(|e| e.into_inner());
        return name.clone().map_or(Frame::NullBulk, Frame::Bulk);
    }
    if is(sub, "setname") && args.len() == 2 {
        let name = &args[1];
        if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
            return Frame::error(
                "ERR Client names cannot contain spaces, newlines or special characters.",
            );
        }
        *sess.client.name.lock().unwrap_or_else(|e| e.into_inner()) =
            (!name.is_empty()).then(|| Bytes::copy_from_slice(name));
        return Frame::status("OK");
    }
    if is(sub, "kill") && args.len() == 2 {
        let addr = String::from_utf8_lossy(&args[1]);
        return match node
            .clients
            .all()
            .into_iter()
            // A client already killed is gone, though its connection's
            // task may not have left the table yet.
            .find(|c| c.addr.to_string() == addr && !c.kill.is_cancelled())
        {
            Some(c) => {
                c.kill.cancel();
                Frame::status("OK")
            }
            None => Frame::error("ERR No such client"),
        };
    }
    if is(sub, "kill") && args.len() == 3 {
        let killed = if is(&args[1], "id") {
            let Some(id) = parse_i64(&args[2]) else {
                return syntax_error();
            };
            node.clients
                .all()
                .into_iter()
                .filter(|c| c.id as i64 == id && !c.kill.is_cancelled())
                .map(|c| c.kill.cancel())
                .count()
        } else if is(&args[1], "addr") {
            let addr = String::from_utf8_lossy(&args[2]);
            node.clients
                .all()
                .into_iter()
                .filter(|c| c.addr.to_string() == addr && !c.kill.is_cancelled())
                .map(|c| c.kill.cancel())
                .count()
        } else {
            return syntax_error();
        };
        return Frame::Integer(killed as i64);
    }
    syntax_error()
}
