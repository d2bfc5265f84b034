//! The shared connection to one node: every non-blocking command of every
//! caller goes down one socket and is answered in order.
//!
//! A caller appends its command to the outgoing buffer and a reply slot to
//! the queue of waiting callers under one short lock, in the same order, and
//! awaits its slot. One writer task sends whatever has gathered in one
//! write; one reader task parses the replies and fills the slots in order.
//! So a command costs one lock, one slot and its own bytes: no per-command
//! allocation for its encoding, no channel hop before the write, and a
//! reply is built straight from the read buffer.
//!
//! Both tasks stop when the connection fails, when it is closed
//! ([`Mux::close`], which also waits for them), or when the last [`Mux`]
//! handle is dropped (a caller still awaiting a reply holds one); every
//! waiting caller then gets the failure.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use redis::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::resp::{self, Reply};

/// Bytes read ahead at a time.
const READ_CHUNK: usize = 16 * 1024;
/// A write buffer grown past this by a burst of large commands is given
/// back instead of kept.
const KEEP_WRITE_BUFFER: usize = 1024 * 1024;

/// Why a command got no reply from the node.
#[derive(Debug)]
pub(crate) enum MuxError {
    /// The node answered with an error reply: its first word and the rest.
    Server {
        /// `ERR`, `NOREPL`, `PAUSED`, ...
        code: String,
        /// The rest of the reply.
        message: String,
    },
    /// The connection failed (or was closed) before the reply came; the
    /// command had been queued, so the node may have run it.
    Connection(redis::RedisError),
    /// The connection had already failed (or was closing): the command was
    /// refused before anything was sent.
    Unsent(redis::RedisError),
}

impl MuxError {
    /// The same failure, for a command that was never sent.
    fn unsent(self) -> Self {
        match self {
            MuxError::Connection(err) => MuxError::Unsent(err),
            other => other,
        }
    }

    fn server(text: &str) -> Self {
        let (code, message) = text.split_once(' ').unwrap_or((text, ""));
        MuxError::Server {
            code: code.to_owned(),
            message: message.to_owned(),
        }
    }
}

/// How a connection ended, handed to every caller still waiting.
#[derive(Clone, Debug)]
struct Failure {
    kind: io::ErrorKind,
    message: String,
}

impl Failure {
    fn from_io(err: &io::Error) -> Self {
        Failure {
            kind: err.kind(),
            message: err.to_string(),
        }
    }

    fn error(&self) -> MuxError {
        MuxError::Connection(io::Error::new(self.kind, self.message.clone()).into())
    }
}

type Slot = oneshot::Sender<Result<Value, MuxError>>;

#[derive(Default)]
struct State {
    /// Encoded commands not yet handed to the writer.
    out: Vec<u8>,
    /// One slot per command sent and not yet answered, oldest first.
    waiting: VecDeque<Slot>,
    /// Set once the connection is unusable.
    failed: Option<Failure>,
    /// Set by [`Mux::close`]: new commands are refused.
    closing: bool,
}

struct Shared {
    state: Mutex<State>,
    /// When the oldest unanswered command became the oldest ([`stamp`]),
    /// 0 while none waits: how long the connection's head of line has been
    /// held up, read without the lock by [`Mux::stalled_for`].
    head_since: AtomicU64,
    /// When the latest reply arrived ([`stamp`]), 0 before the first.
    last_reply: AtomicU64,
    /// Commands sent and not yet answered (`waiting.len()`), readable
    /// without the lock.
    in_flight: AtomicUsize,
    /// Set with `State::failed`, readable without the lock.
    failed: AtomicBool,
    /// Wakes the writer when `out` stops being empty.
    wake_writer: Notify,
    /// Stops both tasks.
    stop: CancellationToken,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the connection failed, fails every waiting caller and stops
    /// both tasks.
    fn fail(&self, failure: Failure) {
        let waiting = {
            let mut state = self.lock();
            state.failed.get_or_insert(failure.clone());
            self.failed.store(true, Ordering::Relaxed);
            self.head_since.store(0, Ordering::Relaxed);
            self.in_flight.store(0, Ordering::Relaxed);
            std::mem::take(&mut state.waiting)
        };
        self.stop.cancel();
        for slot in waiting {
            let _ = slot.send(Err(failure.error()));
        }
    }
}

/// Owns the two tasks; stops them when the last handle goes.
struct Owner {
    shared: Arc<Shared>,
    /// The reader and writer tasks, until [`Mux::close`] joins them.
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Owner {
    fn stop(&self) {
        self.shared.fail(closed_by_client());
    }
}

fn closed_by_client() -> Failure {
    Failure {
        kind: io::ErrorKind::NotConnected,
        message: "connection closed by the client".into(),
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A handle on one node's shared connection; clones share it.
#[derive(Clone)]
pub(crate) struct Mux {
    owner: Arc<Owner>,
}

impl Mux {
    /// Connects to `addr` (`host:port`) and authenticates with `password`
    /// if one is given, both within `timeout`.
    pub(crate) async fn connect(
        addr: &str,
        password: Option<&str>,
        timeout: Duration,
    ) -> Result<Mux, redis::RedisError> {
        match tokio::time::timeout(timeout, Mux::open(addr, password)).await {
            Ok(opened) => opened,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connecting (TCP and AUTH) timed out after {timeout:?}"),
            )
            .into()),
        }
    }

    /// [`Mux::connect`] without its deadline.
    async fn open(addr: &str, password: Option<&str>) -> Result<Mux, redis::RedisError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (reader, writer) = stream.into_split();
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            head_since: AtomicU64::new(0),
            last_reply: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            wake_writer: Notify::new(),
            stop: CancellationToken::new(),
        });
        let tasks = vec![
            tokio::spawn(read_replies(shared.clone(), reader)),
            tokio::spawn(write_commands(shared.clone(), writer)),
        ];
        let mux = Mux {
            owner: Arc::new(Owner {
                shared,
                tasks: Mutex::new(tasks),
            }),
        };
        if let Some(password) = password {
            let mut auth = redis::cmd("AUTH");
            auth.arg(password);
            match mux.send(&auth).await {
                Ok(_) => {}
                Err(MuxError::Server { code, message }) => {
                    return Err((
                        redis::ErrorKind::AuthenticationFailed,
                        "authentication failed",
                        format!("{code} {message}"),
                    )
                        .into())
                }
                Err(MuxError::Connection(err) | MuxError::Unsent(err)) => return Err(err),
            }
        }
        Ok(mux)
    }

    /// Sends `cmd` and awaits its reply. Dropping the future before the
    /// reply leaves the connection in order (the reply is read and thrown
    /// away).
    pub(crate) async fn send(&self, cmd: &redis::Cmd) -> Result<Value, MuxError> {
        let reply = self.enqueue(cmd, false)?;
        Self::answer(reply).await
    }

    /// Sends `count` commands already written in RESP (`packed`) under one
    /// lock (one write, in order) and awaits their replies, in order.
    /// Refused as a whole, before anything is sent, when the connection
    /// failed or is closing.
    pub(crate) async fn send_many(
        &self,
        packed: &[u8],
        count: usize,
    ) -> Result<Vec<Result<Value, MuxError>>, MuxError> {
        let replies = {
            let shared = &self.owner.shared;
            let mut state = shared.lock();
            if let Some(failure) = &state.failed {
                return Err(failure.error().unsent());
            }
            if state.closing {
                return Err(closed_by_client().error().unsent());
            }
            let wake = state.out.is_empty();
            if state.waiting.is_empty() {
                shared.head_since.store(stamp(), Ordering::Relaxed);
            }
            state.out.extend_from_slice(packed);
            let mut replies = Vec::with_capacity(count);
            for _ in 0..count {
                let (slot, reply) = oneshot::channel();
                state.waiting.push_back(slot);
                replies.push(reply);
            }
            shared
                .in_flight
                .store(state.waiting.len(), Ordering::Relaxed);
            drop(state);
            if wake {
                shared.wake_writer.notify_one();
            }
            replies
        };
        let mut answers = Vec::with_capacity(replies.len());
        for reply in replies {
            answers.push(Self::answer(reply).await);
        }
        Ok(answers)
    }

    /// Queues `cmd` and its reply slot, in the same order, under one lock.
    /// Refused once the connection failed, or is closing unless `closing`.
    fn enqueue(
        &self,
        cmd: &redis::Cmd,
        closing: bool,
    ) -> Result<oneshot::Receiver<Result<Value, MuxError>>, MuxError> {
        let shared = &self.owner.shared;
        let mut state = shared.lock();
        if let Some(failure) = &state.failed {
            return Err(failure.error().unsent());
        }
        if state.closing && !closing {
            return Err(closed_by_client().error().unsent());
        }
        state.closing |= closing;
        let wake = state.out.is_empty();
        cmd.write_packed_command(&mut state.out);
        let (slot, reply) = oneshot::channel();
        if state.waiting.is_empty() {
            shared.head_since.store(stamp(), Ordering::Relaxed);
        }
        state.waiting.push_back(slot);
        shared
            .in_flight
            .store(state.waiting.len(), Ordering::Relaxed);
        drop(state);
        if wake {
            shared.wake_writer.notify_one();
        }
        Ok(reply)
    }

    async fn answer(reply: oneshot::Receiver<Result<Value, MuxError>>) -> Result<Value, MuxError> {
        match reply.await {
            Ok(result) => result,
            Err(_) => Err(Failure {
                kind: io::ErrorKind::NotConnected,
                message: "connection closed".into(),
            }
            .error()),
        }
    }

    /// How long the oldest unanswered command has been waiting at the head
    /// of the line (since it was sent, or since the reply before it came),
    /// `now` being a [`stamp`]; zero when nothing waits. A node answers one
    /// connection's commands strictly in order, so a slow command holds up
    /// every later one on the same connection.
    pub(crate) fn stalled_for(&self, now: u64) -> Duration {
        match self.owner.shared.head_since.load(Ordering::Relaxed) {
            0 => Duration::ZERO,
            since => Duration::from_micros(now.saturating_sub(since)),
        }
    }

    /// Commands sent on this connection and not yet answered.
    pub(crate) fn in_flight(&self) -> usize {
        self.owner.shared.in_flight.load(Ordering::Relaxed)
    }

    /// When the node last answered on this connection (a [`stamp`]), 0
    /// before its first reply.
    pub(crate) fn last_reply(&self) -> u64 {
        self.owner.shared.last_reply.load(Ordering::Relaxed)
    }

    /// True once the connection can take no more commands.
    pub(crate) fn is_failed(&self) -> bool {
        self.owner.shared.failed.load(Ordering::Relaxed)
    }

    /// Closes the connection gracefully: new commands are refused at once,
    /// the commands already sent get their replies for up to `drain` (a
    /// last `PING` is answered after all of them), then every caller still
    /// waiting gets a "closed by the client" error and both tasks are
    /// stopped and joined.
    pub(crate) async fn close(&self, drain: Duration) {
        if let Ok(last) = self.enqueue(&redis::cmd("PING"), true) {
            let _ = tokio::time::timeout(drain, Self::answer(last)).await;
        }
        self.owner.stop();
        let tasks = std::mem::take(
            &mut *self
                .owner
                .tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for task in tasks {
            let _ = task.await;
        }
    }
}

/// What the writer does next.
enum Next {
    /// Nothing to send: wait for a caller.
    Wait,
    /// Let other callers add to the batch first.
    Yield,
    /// Send the batch taken.
    Write,
}

/// The writer task: sends what callers have gathered, one write per batch.
async fn write_commands(shared: Arc<Shared>, mut writer: OwnedWriteHalf) {
    let mut batch = Vec::new();
    let mut yielded = false;
    loop {
        let next = {
            let mut state = shared.lock();
            if state.failed.is_some() {
                return;
            }
            if state.out.is_empty() {
                Next::Wait
            } else if !yielded && state.waiting.len() > 1 {
                // Other commands in flight mean other callers are busy: let
                // those already running on this thread add theirs first, for
                // fewer and fuller writes. A lone caller's command goes at
                // once.
                Next::Yield
            } else {
                std::mem::swap(&mut state.out, &mut batch);
                Next::Write
            }
        };
        match next {
            Next::Wait => {
                tokio::select! {
                    biased;
                    () = shared.stop.cancelled() => return,
                    () = shared.wake_writer.notified() => {}
                }
                yielded = false;
                continue;
            }
            Next::Yield => {
                tokio::task::yield_now().await;
                yielded = true;
                continue;
            }
            Next::Write => yielded = false,
        }
        let written = tokio::select! {
            biased;
            () = shared.stop.cancelled() => return,
            written = writer.write_all(&batch) => written,
        };
        if let Err(err) = written {
            shared.fail(Failure::from_io(&err));
            return;
        }
        batch.clear();
        if batch.capacity() > KEEP_WRITE_BUFFER {
            batch = Vec::new();
        }
    }
}

/// The reader task: parses replies and hands each to the oldest waiting
/// caller.
async fn read_replies(shared: Arc<Shared>, mut reader: OwnedReadHalf) {
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let mut replies = Vec::new();
    let mut slots = Vec::new();
    let failure = loop {
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        let read = tokio::select! {
            biased;
            () = shared.stop.cancelled() => return,
            read = reader.read_buf(&mut buf) => read,
        };
        match read {
            Ok(0) => {
                break Failure {
                    kind: io::ErrorKind::UnexpectedEof,
                    message: "the node closed the connection".into(),
                }
            }
            Ok(_) => {}
            Err(err) => break Failure::from_io(&err),
        }
        let parsed = loop {
            match resp::parse(&buf) {
                Ok(Some((reply, used))) => {
                    buf.advance(used);
                    replies.push(reply);
                }
                Ok(None) => break Ok(()),
                Err(err) => break Err(err),
            }
        };
        if !replies.is_empty() {
            let mut state = shared.lock();
            let n = replies.len().min(state.waiting.len());
            slots.extend(state.waiting.drain(..n));
            let now = stamp();
            shared.last_reply.store(now, Ordering::Relaxed);
            let since = if state.waiting.is_empty() { 0 } else { now };
            shared.head_since.store(since, Ordering::Relaxed);
            shared
                .in_flight
                .store(state.waiting.len(), Ordering::Relaxed);
        }
        let unasked = replies.len() - slots.len();
        for (slot, reply) in slots.drain(..).zip(replies.drain(..)) {
            let _ = slot.send(match reply {
                Reply::Value(value) => Ok(value),
                Reply::Error(text) => Err(MuxError::server(&text)),
            });
        }
        if unasked > 0 {
            break Failure {
                kind: io::ErrorKind::InvalidData,
                message: "the node sent a reply nobody asked for".into(),
            };
        }
        if let Err(err) = parsed {
            break Failure {
                kind: io::ErrorKind::InvalidData,
                message: format!("protocol error: {}", err.0),
            };
        }
    };
    shared.fail(failure);
}

/// Microseconds since the first call in this process, never 0: the clock
/// of [`Mux::stalled_for`] (an atomic `u64`, unlike an `Instant`).
pub(crate) fn stamp() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

#[cfg(test)]
mod tests;
