//! Entry points for the coverage-guided fuzz targets in `ezmq-fuzz/`.
//!
//! Not part of the supported API (hidden from the docs): it exposes the
//! private request framing (`connection.rs`) and command execution
//! (`cmd/`) without a socket, so a fuzzer can feed them arbitrary bytes.

use crate::clients::ClientGuard;
use crate::cmd::{dispatch, Outcome, Session};
use crate::connection::{parse_request, Limits, MultibulkState, Parsed, ProtocolError};
use crate::frame::Frame;
use crate::state::{now, Node};
use crate::ServerConfig;
use bytes::{Bytes, BytesMut};
use std::net::{Ipv4Addr, SocketAddr};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Largest request the fuzzing entry points accept (the server's default
/// is 64 MiB; a smaller one lets a fuzzer reach the size checks).
pub const MAX_REQUEST: usize = 1024 * 1024;

/// What framing made of a byte stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Framed {
    /// Every complete request, in order (a request is its arguments; an
    /// empty inline line or `*0` is an empty request).
    pub commands: Vec<Vec<Bytes>>,
    /// The protocol error that stopped parsing (the server then closes
    /// the connection), if any.
    pub error: Option<String>,
    /// Bytes left unparsed (an incomplete last request).
    pub rest: usize,
}

/// Splits `bytes` into requests with the server's framing, as if they
/// arrived in one read, from an authenticated client.
pub fn parse_frames(bytes: &[u8]) -> Framed {
    parse_frames_chunked(bytes, &[], true)
}

/// Like [`parse_frames`], but the bytes arrive in reads of the given
/// lengths (cycled; a zero length is read as one byte), from an
/// authenticated client or not (`authed`).
pub fn parse_frames_chunked(bytes: &[u8], chunks: &[usize], authed: bool) -> Framed {
    let limits = Limits {
        max_request: MAX_REQUEST,
        authed,
    };
    let mut buf = BytesMut::new();
    let mut state = MultibulkState::default();
    let mut commands = Vec::new();
    let mut fed = 0;
    let mut lens = chunks.iter().copied().cycle();
    while fed < bytes.len() {
        let len = if chunks.is_empty() {
            bytes.len()
        } else {
            lens.next().unwrap_or(1).max(1)
        };
        let end = fed.saturating_add(len).min(bytes.len());
        buf.extend_from_slice(&bytes[fed..end]);
        fed = end;
        loop {
            match parse_request(&mut buf, &mut state, limits) {
                Ok(Parsed::Command(args)) => commands.push(args),
                Ok(Parsed::Incomplete) => break,
                Err(ProtocolError(msg)) => {
                    return Framed {
                        commands,
                        error: Some(msg),
                        rest: buf.len() + bytes.len() - fed,
                    }
                }
            }
        }
    }
    Framed {
        commands,
        error: None,
        rest: buf.len(),
    }
}

/// Encodes a request as a RESP multibulk (what a client library sends).
pub fn encode_request(args: &[Bytes]) -> Vec<u8> {
    let frame = Frame::Array(args.iter().cloned().map(Frame::Bulk).collect());
    let mut out = BytesMut::new();
    frame.write_to(&mut out);
    out.to_vec()
}

/// A standalone node with a fresh in-memory store and one client
/// connection, driven without a socket.
#[derive(Debug)]
pub struct FuzzServer {
    node: Node,
    sess: Session,
    /// GETJOB calls still blocked: their replies arrive here.
    blocked: Vec<(u64, oneshot::Receiver<Frame>)>,
    /// IDs of the jobs ADDJOB created, for `@0`..`@9` arguments.
    added: Vec<Bytes>,
    closed: bool,
    _client: ClientGuard,
}

impl FuzzServer {
    /// A node with default settings (no password, no persistence).
    pub fn new() -> FuzzServer {
        let config = ServerConfig::default()
            .with_port(0)
            .with_max_request_bytes(MAX_REQUEST);
        let node = Node::new("0".repeat(40), 0, &config, None, None);
        let client = node.clients.register(
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            -1,
            CancellationToken::new(),
        );
        FuzzServer {
            sess: Session::new(client.client.clone()),
            node,
            blocked: Vec::new(),
            added: Vec::new(),
            closed: false,
            _client: client,
        }
    }

    /// Runs one request (its arguments, the command name first) and
    /// returns the reply bytes. An argument `@0`..`@9` stands for the id
    /// of the first..tenth job ADDJOB created (random ids a fuzzer could
    /// not guess; left as is when there is no such job). A GETJOB that
    /// would block stays registered (as a client waiting on another
    /// connection would) and gets no reply here; QUIT and MONITOR end the connection, after
    /// which every request is ignored.
    pub fn run_command(&mut self, args: &[Bytes]) -> Vec<u8> {
        if self.closed {
            return Vec::new();
        }
        let args: Vec<Bytes> = args.iter().map(|a| self.job_ref(a)).collect();
        let adding = args
            .first()
            .is_some_and(|n| n.eq_ignore_ascii_case(b"addjob"));
        let mut out = BytesMut::new();
        match dispatch(&self.node, &mut self.sess, &args) {
            Outcome::Reply(Frame::Status(id)) if adding => {
                Frame::Status(id.clone()).write_to(&mut out);
                self.added.push(id);
            }
            Outcome::Reply(f) | Outcome::Delay(_, f) => f.write_to(&mut out),
            Outcome::NoReply => {}
            Outcome::Quit | Outcome::Monitor => {
                Frame::status("OK").write_to(&mut out);
                self.closed = true;
            }
            Outcome::Block(b) => self.blocked.push((b.wid, b.rx)),
            Outcome::Replicate(r) => {
                // A standalone node never replicates; drop the job as a
                // timed-out cluster ADDJOB would be.
                self.node.store().delete_job(&r.id);
            }
        }
        // Blocked GETJOBs a command served (their clients read it).
        self.blocked.retain_mut(|(_, rx)| rx.try_recv().is_err());
        out.to_vec()
    }

    /// An `@n` argument resolved to the id of the n-th job added.
    fn job_ref(&self, arg: &Bytes) -> Bytes {
        match arg[..] {
            [b'@', d @ b'0'..=b'9'] => self
                .added
                .get(usize::from(d - b'0'))
                .cloned()
                .unwrap_or_else(|| arg.clone()),
            _ => arg.clone(),
        }
    }

    /// Feeds bytes as one connection's input, in reads of the given
    /// lengths (cycled; see [`parse_frames_chunked`]), parsing with the
    /// limits the server applies (a client is unauthenticated until AUTH
    /// when a password is set). Returns every reply; a protocol error
    /// ends with `-ERR Protocol error: ...` and closes the connection.
    pub fn feed(&mut self, bytes: &[u8], chunks: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = BytesMut::new();
        let mut state = MultibulkState::default();
        let mut fed = 0;
        let mut lens = chunks.iter().copied().cycle();
        while fed < bytes.len() && !self.closed {
            let len = if chunks.is_empty() {
                bytes.len()
            } else {
                lens.next().unwrap_or(1).max(1)
            };
            let end = fed.saturating_add(len).min(bytes.len());
            buf.extend_from_slice(&bytes[fed..end]);
            fed = end;
            while !self.closed {
                let limits = Limits {
                    max_request: self.node.max_request,
                    authed: self.sess.is_authed(&self.node),
                };
                match parse_request(&mut buf, &mut state, limits) {
                    Ok(Parsed::Command(args)) => out.extend(self.run_command(&args)),
                    Ok(Parsed::Incomplete) => break,
                    Err(ProtocolError(msg)) => {
                        let mut reply = BytesMut::new();
                        Frame::error_owned(format!("ERR Protocol error: {msg}"))
                            .write_to(&mut reply);
                        out.extend_from_slice(&reply);
                        self.closed = true;
                    }
                }
            }
        }
        out
    }

    /// Runs the node's timers as if `secs` seconds had passed (delays,
    /// retries, TTL expiry), then reclaims idle queues.
    pub fn advance(&mut self, secs: u64) {
        let later = now().saturating_add(secs.saturating_mul(1000));
        let mut store = self.node.store();
        store.process_timers(later);
        store.gc_queues(later / 1000);
    }

    /// Number of jobs the node holds.
    pub fn job_count(&self) -> usize {
        self.node.store().jobs.len()
    }
}

impl Default for FuzzServer {
    fn default() -> Self {
        FuzzServer::new()
    }
}

impl Drop for FuzzServer {
    fn drop(&mut self) {
        let mut store = self.node.store();
        for (wid, _) in self.blocked.drain(..) {
            store.remove_waiter(wid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_in_pieces_match_one_read() {
        let input = b"*3\r\n$6\r\nADDJOB\r\n$1\r\nq\r\n$4\r\nbody\r\nQLEN q\r\n*0\r\n\r\n";
        let whole = parse_frames(input);
        assert_eq!(whole.commands.len(), 4);
        assert_eq!(whole.error, None);
        assert_eq!(whole.rest, 0);
        for n in 1..8 {
            assert_eq!(parse_frames_chunked(input, &[n], true), whole);
        }
        let again = parse_frames(&encode_request(&whole.commands[0]));
        assert_eq!(again.commands, vec![whole.commands[0].clone()]);
    }

    #[test]
    fn a_session_adds_gets_and_acks() {
        let mut s = FuzzServer::new();
        let out = s.feed(b"ADDJOB q body 0\r\nQLEN q\r\n", &[3]);
        let text = String::from_utf8_lossy(&out).into_owned();
        assert!(text.starts_with("+D-"), "{text}");
        assert!(text.ends_with(":1\r\n"), "{text}");
        let out = s.feed(b"GETJOB NOHANG FROM q\r\n", &[]);
        assert!(out.starts_with(b"*1\r\n*3\r\n"));
        assert_eq!(s.job_count(), 1);
        assert_eq!(
            s.feed(b"ACKJOB @0 @1\r\n", &[]),
            b"-BADID Invalid Job ID format.\r\n"
        );
        assert_eq!(s.feed(b"ACKJOB @0\r\n", &[]), b":1\r\n");
        // A blocked GETJOB is served by a later ADDJOB.
        let out = s.feed(
            b"GETJOB FROM other\r\nADDJOB other x 0\r\nQLEN other\r\n",
            &[],
        );
        assert!(String::from_utf8_lossy(&out).ends_with(":0\r\n"));
        s.advance(3 * 24 * 3600);
        assert_eq!(s.job_count(), 0);
        assert_eq!(
            s.feed(b"*1\r\n$x\r\n", &[]),
            b"-ERR Protocol error: invalid bulk length\r\n"
        );
        assert!(s.feed(b"PING\r\n", &[]).is_empty());
    }
}
