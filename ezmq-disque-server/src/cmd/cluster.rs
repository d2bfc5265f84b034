//! CLUSTER MYID / INFO / NODES / LEAVING / MEET / FORGET.

use super::is;
use crate::frame::Frame;
use crate::state::Node;
use bytes::Bytes;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

fn wrong() -> Frame {
    Frame::error("ERR Wrong CLUSTER subcommand or number of arguments")
}

/// `CLUSTER subcommand ...`.
pub(crate) fn cluster(node: &Node, args: &[Bytes]) -> Frame {
    let sub = &args[0];
    let n = args.len();
    if is(sub, "myid") && n == 1 {
        return Frame::Bulk(Bytes::copy_from_slice(node.id.as_bytes()));
    }
    if is(sub, "info") && n == 1 {
        let (known, reachable) = match &node.link {
            Some(link) => (link.bus.size(), link.bus.reachable_peers(link.me).len()),
            None => (1, 0),
        };
        return Frame::Bulk(Bytes::from(format!(
            "cluster_state:ok\r\ncluster_known_nodes:{known}\r\ncluster_reachable_nodes:{reachable}\r\n\
             cluster_size:{known}\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n"
        )));
    }
    if is(sub, "nodes") && n == 1 {
        return Frame::Bulk(Bytes::from(nodes(node)));
    }
    if is(sub, "leaving") && n <= 2 {
        let leaving = &node.settings.leaving;
        return match args.get(1) {
            None => Frame::status(if leaving.load(Ordering::Relaxed) {
                "yes"
            } else {
                "no"
            }),
            Some(v) if is(v, "yes") || is(v, "no") => {
                leaving.store(is(v, "yes"), Ordering::Relaxed);
                if let Some(link) = &node.link {
                    link.bus.set_leaving(link.me, is(v, "yes"));
                }
                Frame::status("OK")
            }
            Some(_) => Frame::error("ERR Wrong argument for CLUSTER LEAVING. Use 'yes' or 'no'"),
        };
    }
    if is(sub, "meet") && n == 3 {
        let port = std::str::from_utf8(&args[2])
            .ok()
            .and_then(|p| p.parse::<u16>().ok());
        if port.is_none() {
            return Frame::error_owned(format!(
                "ERR Invalid TCP port specified: {}",
                String::from_utf8_lossy(&args[2])
            ));
        }
        return Frame::error(
            "ERR CLUSTER MEET is not supported: the nodes of an ezmq cluster run in one process",
        );
    }
    if is(sub, "forget") && n == 2 {
        let id = &args[1];
        if id.len() != 40 || !id.iter().all(u8::is_ascii_hexdigit) {
            return Frame::error("ERR Invalid node identifier");
        }
        if id.eq_ignore_ascii_case(node.id.as_bytes()) {
            return Frame::error("ERR I tried hard but I can't forget myself...");
        }
        let known = node.link.as_ref().is_some_and(|l| {
            (0..l.bus.size() as u16).any(|i| l.bus.id(i).as_bytes().eq_ignore_ascii_case(id))
        });
        if known {
            return Frame::error("ERR CLUSTER FORGET is not supported by ezmq-disque-server");
        }
        return Frame::error_owned(format!("ERR Unknown node {}", String::from_utf8_lossy(id)));
    }
    wrong()
}

fn nodes(node: &Node) -> String {
    let mut out = String::new();
    let leaving = node.settings.leaving.load(Ordering::Relaxed);
    match &node.link {
        None => {
            let _ = writeln!(
                out,
                "{} {}:{} myself{} 0 0 connected",
                node.id,
                node.config.bind,
                node.port,
                if leaving { ",leaving" } else { "" }
            );
        }
        Some(link) => {
            for (nid, host, port, prio) in link.bus.hello(link.me) {
                let me = nid == node.id;
                let mut flags = Vec::new();
                if me {
                    flags.push("myself");
                }
                if (me && leaving) || prio == "100" {
                    flags.push("leaving");
                }
                if prio == "10" {
                    flags.push("fail");
                }
                if flags.is_empty() {
                    flags.push("noflags");
                }
                let link_state = if prio == "10" && !me {
                    "disconnected"
                } else {
                    "connected"
                };
                let _ = writeln!(
                    out,
                    "{nid} {host}:{port} {} 0 0 {link_state}",
                    flags.join(",")
                );
            }
        }
    }
    out
}
