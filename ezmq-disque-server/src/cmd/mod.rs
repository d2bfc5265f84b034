//! Command dispatch. One module per command family.

pub(crate) mod ack;
pub(crate) mod addjob;
pub(crate) mod getjob;
pub(crate) mod queue;
pub(crate) mod scan;
pub(crate) mod server;
pub(crate) mod show;

use crate::frame::Frame;
use crate::job::JobId;
use crate::parse::parse_i64;
use crate::state::Node;
use bytes::Bytes;
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
}

/// Per-connection command state.
#[derive(Debug)]
pub(crate) struct Session {
    /// True once AUTH succeeded (or when no password is configured).
    pub(crate) authed: bool,
}

type Handler = fn(&Node, &[Bytes]) -> Frame;

enum Kind {
    Simple(Handler),
    AddJob,
    GetJob,
    Auth,
}

/// Executes one command.
pub(crate) fn dispatch(node: &Node, sess: &mut Session, args: &[Bytes]) -> Outcome {
    let Some(name) = args.first() else {
        return Outcome::NoReply;
    };
    let mut lower = [0u8; 16];
    let lname: &[u8] = if name.len() <= lower.len() {
        for (d, s) in lower.iter_mut().zip(name.iter()) {
            *d = s.to_ascii_lowercase();
        }
        &lower[..name.len()]
    } else {
        b""
    };
    let (cname, arity, kind): (&str, i32, Kind) = match lname {
        b"quit" => return Outcome::Quit,
        b"addjob" => ("addjob", -4, Kind::AddJob),
        b"getjob" => ("getjob", -2, Kind::GetJob),
        b"ackjob" => ("ackjob", -1, Kind::Simple(ack::ackjob)),
        b"fastack" => ("fastack", -1, Kind::Simple(ack::fastack)),
        b"deljob" => ("deljob", -1, Kind::Simple(ack::deljob)),
        b"nack" => ("nack", -1, Kind::Simple(ack::nack)),
        b"enqueue" => ("enqueue", -1, Kind::Simple(ack::enqueue)),
        b"dequeue" => ("dequeue", -1, Kind::Simple(ack::dequeue)),
        b"working" => ("working", 2, Kind::Simple(ack::working)),
        b"show" => ("show", 2, Kind::Simple(show::show)),
        b"qlen" => ("qlen", 2, Kind::Simple(queue::qlen)),
        b"qpeek" => ("qpeek", 3, Kind::Simple(queue::qpeek)),
        b"qstat" => ("qstat", 2, Kind::Simple(queue::qstat)),
        b"pause" => ("pause", -3, Kind::Simple(queue::pause)),
        b"qscan" => ("qscan", -1, Kind::Simple(scan::qscan)),
        b"jscan" => ("jscan", -1, Kind::Simple(scan::jscan)),
        b"hello" => ("hello", 1, Kind::Simple(server::hello)),
        b"info" => ("info", -1, Kind::Simple(server::info)),
        b"ping" => ("ping", -1, Kind::Simple(server::ping)),
        b"auth" => ("auth", 2, Kind::Auth),
        b"bgrewriteaof" => ("bgrewriteaof", 1, Kind::Simple(server::bgrewriteaof)),
        b"loadjob" => ("loadjob", 2, Kind::Simple(server::loadjob)),
        _ => {
            let shown: Vec<u8> = name.iter().take(128).copied().collect();
            return Outcome::Reply(Frame::error_owned(format!(
                "ERR unknown command '{}'",
                String::from_utf8_lossy(&shown)
            )));
        }
    };
    let argc = args.len() as i64;
    let arity = i64::from(arity);
    if (arity > 0 && argc != arity) || (arity < 0 && argc < -arity) {
        return Outcome::Reply(arity_error(cname));
    }
    if !sess.authed && !matches!(kind, Kind::Auth) {
        return Outcome::Reply(Frame::error("NOAUTH Authentication required."));
    }
    match kind {
        Kind::Simple(h) => Outcome::Reply(h(node, &args[1..])),
        Kind::AddJob => addjob::addjob(node, &args[1..]),
        Kind::GetJob => getjob::getjob(node, &args[1..]),
        Kind::Auth => Outcome::Reply(server::auth(node, sess, &args[1..])),
    }
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
