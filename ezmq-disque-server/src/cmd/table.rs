//! The command table: name, arity, flags (as COMMAND reports them) and
//! handler of every command.

use super::{
    ack, addjob, admin, client, cluster, getjob, queue, scan, server, show, Outcome, Session,
};
use crate::frame::Frame;
use crate::state::Node;
use bytes::Bytes;

/// A command that only needs the node.
pub(crate) type Simple = fn(&Node, &[Bytes]) -> Frame;
/// A command that needs the connection's session or a special outcome.
pub(crate) type Full = fn(&Node, &mut Session, &[Bytes]) -> Outcome;

/// How a command runs.
#[derive(Clone, Copy)]
pub(crate) enum Handler {
    /// Reply computed from the node alone.
    Simple(Simple),
    /// Needs the session or may block, wait or change the connection.
    Full(Full),
    /// QUIT.
    Quit,
}

/// One command.
#[derive(Clone, Copy)]
pub(crate) struct Command {
    /// Lowercase name.
    pub(crate) name: &'static str,
    /// Redis-style arity: N exactly, -N at least N (the name included).
    pub(crate) arity: i32,
    /// Flags listed by COMMAND.
    pub(crate) flags: &'static [&'static str],
    /// Runs it.
    pub(crate) handler: Handler,
}

const W: &[&str] = &["write", "fast"];
const WS: &[&str] = &["write"];
const R: &[&str] = &["readonly", "fast"];
const RS: &[&str] = &["readonly"];
const A: &[&str] = &["admin"];
const AL: &[&str] = &["admin", "loading", "stale"];
const L: &[&str] = &["loading", "stale", "fast"];

macro_rules! simple {
    ($name:literal, $arity:expr, $flags:expr, $f:path) => {
        Command {
            name: $name,
            arity: $arity,
            flags: $flags,
            handler: Handler::Simple($f),
        }
    };
}

macro_rules! full {
    ($name:literal, $arity:expr, $flags:expr, $f:path) => {
        Command {
            name: $name,
            arity: $arity,
            flags: $flags,
            handler: Handler::Full($f),
        }
    };
}

/// Every command, in the order COMMAND lists them.
pub(crate) static COMMANDS: &[Command] = &[
    full!("addjob", -4, &["write", "denyoom", "fast"], addjob::addjob),
    full!("getjob", -2, &["write", "fast"], getjob::getjob),
    simple!("ackjob", -1, W, ack::ackjob),
    simple!("fastack", -1, W, ack::fastack),
    simple!("working", 2, W, ack::working),
    simple!("nack", -1, W, ack::nack),
    simple!("enqueue", -1, W, ack::enqueue),
    simple!("dequeue", -1, W, ack::dequeue),
    simple!("deljob", -1, W, ack::deljob),
    simple!("show", 2, R, show::show),
    simple!("qlen", 2, R, queue::qlen),
    simple!("qpeek", 3, R, queue::qpeek),
    simple!("qstat", 2, R, queue::qstat),
    simple!("qscan", -1, RS, scan::qscan),
    simple!("jscan", -1, RS, scan::jscan),
    simple!("pause", -3, W, queue::pause),
    simple!("loadjob", 2, WS, server::loadjob),
    simple!(
        "ping",
        -1,
        &["readonly", "loading", "stale", "fast"],
        server::ping
    ),
    simple!("info", -1, &["readonly", "loading", "stale"], server::info),
    simple!("hello", 1, L, server::hello),
    full!(
        "auth",
        2,
        &["readonly", "loading", "stale", "fast", "noauth"],
        server::auth
    ),
    full!("monitor", 1, AL, client::monitor),
    full!("debug", -2, A, admin::debug),
    full!("config", -2, AL, admin::config),
    simple!("cluster", -2, &["readonly", "admin"], cluster::cluster),
    full!("client", -2, AL, client::client),
    simple!("slowlog", -2, RS, admin::slowlog),
    simple!("time", 1, &["readonly", "fast"], admin::time),
    simple!("bgrewriteaof", 1, A, server::bgrewriteaof),
    simple!(
        "command",
        0,
        &["readonly", "loading", "stale"],
        admin::command
    ),
    Command {
        name: "quit",
        arity: -1,
        flags: &["readonly", "loading", "stale", "fast", "noauth"],
        handler: Handler::Quit,
    },
];

/// Index in [`COMMANDS`] of the command named `name` (any case).
pub(crate) fn lookup(name: &[u8]) -> Option<usize> {
    COMMANDS
        .iter()
        .position(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
}

/// The COMMAND / COMMAND INFO entry of a command.
pub(crate) fn entry(c: &Command) -> Frame {
    Frame::Array(vec![
        Frame::Bulk(Bytes::from_static(c.name.as_bytes())),
        Frame::Integer(i64::from(c.arity)),
        Frame::Array(
            c.flags
                .iter()
                .map(|f| Frame::Status(Bytes::from_static(f.as_bytes())))
                .collect(),
        ),
        Frame::Integer(0),
        Frame::Integer(0),
        Frame::Integer(0),
    ])
}
