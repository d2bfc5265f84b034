//! Command dispatch. One module per command family.

pub(crate) mod ack;
pub(crate) mod addjob;
pub(crate) mod admin;
pub(crate) mod client;
pub(crate) mod cluster;
pub(crate) mod getjob;
pub(crate) mod queue;
pub(crate) mod scan;
pub(crate) mod server;
pub(crate) mod show;
pub(crate) mod table;

use crate::clients::Client;
use crate::frame::Frame;
use crate::job::JobId;
use crate::parse::parse_i64;
use crate::state::Node;
use crate::timers::now_s;
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use table::Handler;
use tokio::sync::oneshot;

/// A GETJOB that must wait for a job.
#[derive(Debug)]
pub(crate) struct Blocked {
    /// Waiter registration ID in the store.
    pub(crate) wid: u64,
    /// Receives the reply when a job is handed over.
    pub(crate) rx: oneshot::Receiver<Frame>,
    /// Milliseconds to wait; 0 = forever.
    pub(crate) timeout_ms: u64,
}

/// A cluster ADDJOB waiting for its replicas.
#[derive(Debug)]
pub(crate) struct Replicating {
    /// The job waiting in state `wait-repl`.
    pub(crate) id: JobId,
    /// Receives the reply once enough nodes hold a copy.
    pub(crate) rx: oneshot::Receiver<Frame>,
    /// The ADDJOB ms-timeout; 0 = wait forever.
    pub(crate) timeout_ms: u64,
}

/// What the connection must do after a command.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Send this reply.
    Reply(Frame),
    /// Send nothing (empty inline line).
    NoReply,
    /// Wait for a job.
    Block(Blocked),
    /// Wait for synchronous replication (cluster ADDJOB).
    Replicate(Replicating),
    /// Reply `+OK` and close.
    Quit,
    /// Reply `+OK` and turn into a MONITOR connection.
    Monitor,
    /// Send this reply after a pause (DEBUG SLEEP).
    Delay(Duration, Frame),
}

/// Per-connection command state.
#[derive(Debug)]
pub(crate) struct Session {
    /// The password epoch of the last successful AUTH: a connection is
    /// authenticated while no password is set or while the password it
    /// authenticated with is still the current one.
    pub(crate) auth_epoch: Option<u64>,
    /// This connection in the node's client registry.
    pub(crate) client: Arc<Client>,
}

impl Session {
    /// A session for a new connection.
    pub(crate) fn new(client: Arc<Client>) -> Session {
        Session {
            auth_epoch: None,
            client,
        }
    }

    /// True when commands other than AUTH may run.
    pub(crate) fn is_authed(&self, node: &Node) -> bool {
        match node.auth.epoch_if_required() {
            None => true,
            Some(epoch) => self.auth_epoch == Some(epoch),
        }
    }
}

/// Executes one command.
pub(crate) fn dispatch(node: &Node, sess: &mut Session, args: &[Bytes]) -> Outcome {
    let Some(name) = args.first() else {
        return Outcome::NoReply;
    };
    if node.clients.monitors.load(Ordering::Relaxed) > 0 {
        client::feed_monitor(node, sess, args);
    }
    let Some(idx) = table::lookup(name) else {
        let shown: Vec<u8> = name.iter().take(128).copied().collect();
        return Outcome::Reply(Frame::error_owned(format!(
            "ERR unknown command '{}'",
            String::from_utf8_lossy(&shown)
        )));
    };
    let cmd = &table::COMMANDS[idx];
    if matches!(cmd.handler, Handler::Quit) {
        return Outcome::Quit;
    }
    let argc = args.len() as i64;
    let arity = i64::from(cmd.arity);
    if (arity > 0 && argc != arity) || (arity < 0 && argc < -arity) {
        return Outcome::Reply(arity_error(cmd.name));
    }
    if cmd.name != "auth" && !sess.is_authed(node) {
        return Outcome::Reply(Frame::error("NOAUTH Authentication required."));
    }
    let start = Instant::now();
    sess.client.last_cmd.store(idx, Ordering::Relaxed);
    sess.client.last_ms.store(
        start
            .saturating_duration_since(sess.client.created)
            .as_millis() as u64,
        Ordering::Relaxed,
    );
    let out = match cmd.handler {
        Handler::Simple(h) => Outcome::Reply(h(node, &args[1..])),
        Handler::Full(f) => f(node, sess, &args[1..]),
        Handler::Quit => Outcome::Quit,
    };
    let usec = start.elapsed().as_micros() as u64;
    node.stats.record(idx, usec);
    node.slowlog.maybe_log(args, usec, now_s);
    out
}

/// `-ERR wrong number of arguments for '<cmd>' command`.
pub(crate) fn arity_error(cmd: &str) -> Frame {
    Frame::error_owned(format!("ERR wrong number of arguments for '{cmd}' command"))
}

/// `-ERR syntax error`.
pub(crate) fn syntax_error() -> Frame {
    Frame::error("ERR syntax error")
}

/// `-ERR value is not an integer or out of range`.
pub(crate) fn not_int() -> Frame {
    Frame::error("ERR value is not an integer or out of range")
}

/// Parses a millisecond timeout like Disque.
pub(crate) fn parse_timeout(b: &[u8]) -> Result<u64, Frame> {
    match parse_i64(b) {
        None => Err(Frame::error(
            "ERR timeout is not an integer or out of range",
        )),
        Some(n) if n < 0 => Err(Frame::error("ERR timeout is negative")),
        Some(n) => Ok(n as u64),
    }
}

/// Validates every ID before any is used.
pub(crate) fn parse_ids(args: &[Bytes]) -> Result<Vec<JobId>, Frame> {
    args.iter()
        .map(|a| JobId::parse(a).ok_or_else(bad_id))
        .collect()
}

/// `-BADID Invalid Job ID format.`
pub(crate) fn bad_id() -> Frame {
    Frame::error("BADID Invalid Job ID format.")
}

/// Case-insensitive ASCII comparison.
pub(crate) fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}
