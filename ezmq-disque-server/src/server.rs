//! Accept loop and per-connection handling.

use crate::cluster::replication;
use crate::cmd::{dispatch, Blocked, Outcome, Replicating, Session};
use crate::connection::{parse_request, Limits, MultibulkState, Parsed, ProtocolError};
use crate::frame::Frame;
use crate::limits::BufferAccount;
use crate::shutdown::Shutdown;
use crate::state::Node;
use bytes::{BufMut, BytesMut};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

/// Flush the reply buffer early once it grows past this size.
const WRITE_FLUSH_BYTES: usize = 64 * 1024;
/// Read buffer growth step.
const READ_CHUNK: usize = 16 * 1024;
/// An empty read buffer larger than this is replaced by a fresh small one.
const SHRINK_ABOVE: usize = 4 * READ_CHUNK;
/// While a command waits (blocked GETJOB, replication), at most this much
/// of what the client pipelines behind it is read (TCP holds the rest).
const WAITING_READ_BYTES: usize = 4 * READ_CHUNK;

/// Accepts connections until shutdown.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    node: Arc<Node>,
    shutdown: Shutdown,
    tracker: TaskTracker,
    max_clients: usize,
) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.recv() => return,
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::select! {
                    _ = shutdown.recv() => return,
                    _ = tokio::time::sleep(Duration::from_millis(50)) => continue,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        node.stats
            .connections_received
            .fetch_add(1, Ordering::Relaxed);
        let n = node.connected_clients.fetch_add(1, Ordering::AcqRel) + 1;
        if n > max_clients {
            node.connected_clients.fetch_sub(1, Ordering::AcqRel);
            node.stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            debug!(%peer, "refusing client: max clients reached");
            tracker.spawn(async move {
                let mut stream = stream;
                let _ = tokio::time::timeout(Duration::from_secs(1), async {
                    let _ = stream
                        .write_all(b"-ERR max number of clients reached\r\n")
                        .await;
                    let _ = stream.shutdown().await;
                })
                .await;
            });
            continue;
        }
        let node = node.clone();
        let shutdown = shutdown.child();
        tracker.spawn(async move {
            debug!(%peer, "client connected");
            #[cfg(unix)]
            let fd = i64::from(std::os::fd::AsRawFd::as_raw_fd(&stream));
            #[cfg(not(unix))]
            let fd = -1;
            let guard = node.clients.register(peer, fd, shutdown.token());
            handle(&node, stream, &shutdown, Session::new(guard.client.clone())).await;
            drop(guard);
            node.connected_clients.fetch_sub(1, Ordering::AcqRel);
            debug!(%peer, "client disconnected");
        });
    }
}

/// Sends the buffered replies once the append-only log holds the first
/// `need` bytes appended (the records of the commands they answer).
async fn send(
    node: &Node,
    stream: &mut TcpStream,
    wbuf: &mut BytesMut,
    need: u64,
    shutdown: &Shutdown,
) -> bool {
    if wbuf.is_empty() {
        return true;
    }
    // A hung cluster node answers nothing, even what it ran just before.
    if !node.wait_resumed(shutdown.recv()).await {
        return false;
    }
    if let Some(aof) = &node.aof {
        if need > 0 {
            tokio::select! {
                _ = aof.wait_written(need) => {}
                _ = shutdown.recv() => return false,
            }
        }
    }
    flush(stream, wbuf).await
}

async fn flush(stream: &mut TcpStream, wbuf: &mut BytesMut) -> bool {
    if wbuf.is_empty() {
        return true;
    }
    let ok = stream.write_all(wbuf).await.is_ok();
    wbuf.clear();
    ok
}

/// Serves one client until it quits, disconnects, errs, or shutdown.
async fn handle(node: &Node, mut stream: TcpStream, shutdown: &Shutdown, mut sess: Session) {
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut wbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut account = BufferAccount::new(&node.query_budget);
    let mut pstate = MultibulkState::default();
    // Replies wait until the log holds this many bytes (persistence on).
    let mut need = 0u64;
    loop {
        if !node.wait_resumed(shutdown.recv()).await {
            return;
        }
        loop {
            let limits = Limits {
                max_request: node.max_request,
                authed: sess.is_authed(node),
            };
            match parse_request(&mut rbuf, &mut pstate, limits) {
                Ok(Parsed::Incomplete) => break,
                Ok(Parsed::Command(args)) => {
                    // A node hung or frozen meanwhile runs nothing more
                    // until it goes on (a stopped process).
                    if !node.wait_resumed(shutdown.recv()).await {
                        return;
                    }
                    let before = node.aof_appended();
                    let outcome = dispatch(node, &mut sess, &args);
                    let after = node.aof_appended();
                    if after != before {
                        need = after;
                    }
                    match outcome {
                        Outcome::Reply(f) => f.write_to(&mut wbuf),
                        Outcome::NoReply => {}
                        Outcome::Quit => {
                            wbuf.put_slice(b"+OK\r\n");
                            send(node, &mut stream, &mut wbuf, need, shutdown).await;
                            let _ = stream.shutdown().await;
                            return;
                        }
                        Outcome::Replicate(r) => {
                            if !send(node, &mut stream, &mut wbuf, need, shutdown).await {
                                return;
                            }
                            match wait_replicated(node, &mut stream, &mut rbuf, r, shutdown).await {
                                Some(f) => {
                                    need = node.aof_appended();
                                    f.write_to(&mut wbuf)
                                }
                                None => return,
                            }
                        }
                        Outcome::Monitor => {
                            wbuf.put_slice(b"+OK\r\n");
                            if send(node, &mut stream, &mut wbuf, need, shutdown).await {
                                monitor(node, &mut stream, &sess, shutdown).await;
                            }
                            return;
                        }
                        Outcome::Delay(d, f) => {
                            if !send(node, &mut stream, &mut wbuf, need, shutdown).await {
                                return;
                            }
                            tokio::select! {
                                _ = tokio::time::sleep(d) => f.write_to(&mut wbuf),
                                _ = shutdown.recv() => return,
                            }
                        }
                        Outcome::Block(b) => {
                            if !send(node, &mut stream, &mut wbuf, need, shutdown).await {
                                node.store().remove_waiter(b.wid);
                                return;
                            }
                            sess.client.blocked.store(true, Ordering::Relaxed);
                            let r = wait_blocked(node, &mut stream, &mut rbuf, b, shutdown).await;
                            sess.client.blocked.store(false, Ordering::Relaxed);
                            match r {
                                Some(f) => {
                                    need = node.aof_appended();
                                    f.write_to(&mut wbuf)
                                }
                                None => return,
                            }
                        }
                    }
                }
                Err(ProtocolError(msg)) => {
                    protocol_error(&mut stream, &mut wbuf, &msg).await;
                    return;
                }
            }
            if wbuf.len() >= WRITE_FLUSH_BYTES
                && !send(node, &mut stream, &mut wbuf, need, shutdown).await
            {
                return;
            }
        }
        if !send(node, &mut stream, &mut wbuf, need, shutdown).await {
            return;
        }
        let partial = !rbuf.is_empty();
        if !partial && rbuf.capacity() > SHRINK_ABOVE {
            // Give back the room a big request left behind.
            rbuf = BytesMut::with_capacity(READ_CHUNK);
        }
        if rbuf.capacity() - rbuf.len() < READ_CHUNK / 4 {
            rbuf.reserve(READ_CHUNK);
        }
        if !account.update(rbuf.capacity()) {
            warn!(
                held = rbuf.capacity(),
                total = node.query_budget.used(),
                "closing a client: query buffers of all clients over the limit"
            );
            protocol_error(
                &mut stream,
                &mut wbuf,
                "query buffers of all clients over the limit",
            )
            .await;
            return;
        }
        let stall = node.stall_timeout;
        let r = tokio::select! {
            _ = shutdown.recv() => return,
            r = stream.read_buf(&mut rbuf) => r,
            _ = tokio::time::sleep(stall), if partial && !stall.is_zero() => {
                debug!("closing a client: its partial request stalled");
                return;
            }
        };
        match r {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// A MONITOR connection: streams the feed until the client goes away.
async fn monitor(node: &Node, stream: &mut TcpStream, sess: &Session, shutdown: &Shutdown) {
    let mut feed = node.clients.monitor.subscribe();
    sess.client.monitor.store(true, Ordering::Relaxed);
    node.clients.monitors.fetch_add(1, Ordering::Relaxed);
    let mut scratch = [0u8; 1024];
    loop {
        tokio::select! {
            line = feed.recv() => match line {
                Ok(line) => {
                    if stream.write_all(&line).await.is_err() {
                        return;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    debug!(missed = n, "a MONITOR client fell behind");
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            },
            r = stream.read(&mut scratch) => {
                // Commands sent by a MONITOR client are ignored.
                if matches!(r, Ok(0) | Err(_)) {
                    return;
                }
            }
            _ = shutdown.recv() => return,
        }
    }
}

async fn protocol_error(stream: &mut TcpStream, wbuf: &mut BytesMut, msg: &str) {
    Frame::error_owned(format!("ERR Protocol error: {msg}")).write_to(wbuf);
    flush(stream, wbuf).await;
    let _ = stream.shutdown().await;
}

/// Waits for the replicas of a synchronous cluster ADDJOB (`None`: the
/// client went away or shutdown; the job is then removed like on timeout).
async fn wait_replicated(
    node: &Node,
    stream: &mut TcpStream,
    rbuf: &mut BytesMut,
    pending: Replicating,
    shutdown: &Shutdown,
) -> Option<Frame> {
    let id = pending.id;
    let wait = replication::wait_replicated(node, pending);
    tokio::pin!(wait);
    loop {
        if rbuf.capacity() - rbuf.len() < READ_CHUNK / 4 && rbuf.len() < WAITING_READ_BYTES {
            rbuf.reserve(READ_CHUNK);
        }
        tokio::select! {
            f = &mut wait => return Some(f),
            r = stream.read_buf(rbuf), if rbuf.len() < WAITING_READ_BYTES => {
                if matches!(r, Ok(0) | Err(_)) {
                    replication::abandon(node, id);
                    return None;
                }
            }
            _ = shutdown.recv() => return None,
        }
    }
}

/// Waits for a blocked GETJOB to be served, time out, or the client to go
/// away (`None`: close the connection; the waiter is forgotten).
async fn wait_blocked(
    node: &Node,
    stream: &mut TcpStream,
    rbuf: &mut BytesMut,
    blocked: Blocked,
    shutdown: &Shutdown,
) -> Option<Frame> {
    let Blocked {
        wid,
        mut rx,
        timeout_ms,
    } = blocked;
    let deadline = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms));
    let timer = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending::<()>().await,
        }
    };
    tokio::pin!(timer);
    loop {
        if rbuf.capacity() - rbuf.len() < READ_CHUNK / 4 && rbuf.len() < WAITING_READ_BYTES {
            rbuf.reserve(READ_CHUNK);
        }
        tokio::select! {
            r = &mut rx => return Some(r.unwrap_or(Frame::NullArray)),
            _ = &mut timer => {
                let removed = node.store().remove_waiter(wid);
                if removed {
                    return Some(Frame::NullArray);
                }
                return Some(rx.try_recv().unwrap_or(Frame::NullArray));
            }
            r = stream.read_buf(rbuf), if rbuf.len() < WAITING_READ_BYTES => {
                match r {
                    Ok(0) | Err(_) => {
                        node.store().remove_waiter(wid);
                        return None;
                    }
                    Ok(_) => {}
                }
            }
            _ = shutdown.recv() => {
                node.store().remove_waiter(wid);
                return None;
            }
        }
    }
}
