//! A node's shared connections for non-blocking commands: one while the
//! node answers promptly, more while every open one is held up by a slow
//! reply (see [`DisqueConfig::connections_per_node`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex as StdMutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Mutex;

use crate::config::DisqueConfig;
use crate::error::DisqueError;
use crate::mux::{stamp, Mux};

/// A connection whose oldest unanswered command has waited this long is
/// held up: the next command goes down another one (see
/// [`DisqueConfig::connections_per_node`]).
pub(super) const HELD_UP: Duration = Duration::from_millis(10);

/// A pool grows only while the node answered on one of its connections
/// this recently (see [`MuxPool::ready`]).
const ANSWERED_LATELY: Duration = Duration::from_millis(300);

/// Connections opened at once for a node whose open ones are all held up
/// (a burst of commands failing over to it fills a pool fast).
const MAX_ADDING: usize = 8;

/// One of the [`MAX_ADDING`] rights to open a connection; given back on
/// drop.
struct AddingSlot<'a>(&'a AtomicUsize);

impl<'a> AddingSlot<'a> {
    fn take(adding: &'a AtomicUsize) -> Option<Self> {
        adding
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_ADDING).then_some(n + 1)
            })
            .ok()
            .map(|_| AddingSlot(adding))
    }
}

impl Drop for AddingSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The shared connections to one node.
pub(crate) struct MuxPool {
    /// The node's `host:port`.
    addr: String,
    /// Sent with `AUTH` on every connection.
    password: Option<String>,
    connect_timeout: Duration,
    hang_timeout: Duration,
    /// See [`DisqueConfig::connections_per_node`].
    max: usize,
    /// The open connections. A plain mutex: it is only held to pick and
    /// clone a handle, on every command.
    muxes: StdMutex<Vec<Mux>>,
    /// Held while opening the first connection, so concurrent callers open
    /// one, not one each.
    connecting: Mutex<()>,
    /// Connections being added to a held-up pool ([`AddingSlot`]).
    adding: AtomicUsize,
}

impl MuxPool {
    /// No connection open yet to the node at `addr`.
    pub(crate) fn new(addr: String, config: &DisqueConfig) -> Self {
        MuxPool {
            addr,
            password: config.password.clone(),
            connect_timeout: config.connect_timeout,
            hang_timeout: config.hang_timeout,
            max: config.connections_per_node.max(1),
            muxes: StdMutex::new(Vec::new()),
            connecting: Mutex::new(()),
            adding: AtomicUsize::new(0),
        }
    }

    /// A shared connection to send the next command on, without waiting:
    /// with one connection, that one while it is not held up
    /// ([`HELD_UP`]); with more, an idle one, else the one with the fewest
    /// commands waiting (each waits for all before it). `None` when none is
    /// open, or when every one is held up, another may be opened and the
    /// node still answers ([`MuxPool::connection`] then opens one).
    pub(crate) fn ready(&self) -> Option<Mux> {
        let muxes = self.slot();
        let now = stamp();
        if let [only] = muxes.as_slice() {
            // The common case: a node that answers keeps one connection.
            return (only.stalled_for(now) < HELD_UP || self.max == 1).then(|| only.clone());
        }
        let mut best: Option<(&Mux, usize)> = None;
        let mut all_held_up = true;
        for mux in muxes.iter() {
            let waiting = mux.in_flight();
            if waiting == 0 {
                return Some(mux.clone());
            }
            all_held_up &= mux.stalled_for(now) >= HELD_UP;
            if best.is_none_or(|(_, fewest)| waiting < fewest) {
                best = Some((mux, waiting));
            }
        }
        let (mux, _) = best?;
        let grow = all_held_up
            && muxes.len() < self.max
            // A node silent on every connection is stopped or hung, not
            // slow: more connections would only queue more commands on it.
            && last_answer_ago(&muxes, now).is_some_and(|ago| ago < ANSWERED_LATELY);
        if grow {
            return None;
        }
        Some(mux.clone())
    }

    /// The connection for a command when [`MuxPool::ready`] had none:
    /// opens the first connection (waiting for it), or adds one to a pool
    /// whose connections are all held up. Adding is bounded by the hang
    /// timeout and done by [`MAX_ADDING`] callers at a time; the others,
    /// and this one if it fails, use the least held-up open connection.
    pub(crate) async fn connection(&self) -> Result<Mux, DisqueError> {
        if self.slot().is_empty() {
            return self.first_connection().await;
        }
        if let Some(_adding) = AddingSlot::take(&self.adding) {
            if self.ready().is_none() {
                match self.open(self.hang_timeout).await {
                    Ok(mux) => {
                        let mut muxes = self.slot();
                        if muxes.len() >= self.max {
                            // Others added the last ones meanwhile: this one
                            // serves this command only.
                            return Ok(mux);
                        }
                        muxes.push(mux.clone());
                        tracing::debug!(
                            node = %self.addr,
                            connections = muxes.len(),
                            "every connection to the node is held up by a slow reply; opened another"
                        );
                        return Ok(mux);
                    }
                    Err(e) => {
                        tracing::debug!(node = %self.addr, cause = %e, "could not add a connection");
                    }
                }
            }
        }
        match self.least_busy() {
            Some(mux) => Ok(mux),
            // Every connection failed meanwhile.
            None => self.first_connection().await,
        }
    }

    /// Opens the first connection (also after every one failed); callers
    /// arriving meanwhile wait for it and share it.
    async fn first_connection(&self) -> Result<Mux, DisqueError> {
        let _connecting = self.connecting.lock().await;
        // Another caller may have connected while we waited.
        if let Some(mux) = self.slot().first() {
            return Ok(mux.clone());
        }
        let mux = self.open(self.connect_timeout).await?;
        self.slot().push(mux.clone());
        Ok(mux)
    }

    /// The open connection with the fewest commands waiting, if any.
    fn least_busy(&self) -> Option<Mux> {
        self.slot()
            .iter()
            .min_by_key(|mux| mux.in_flight())
            .cloned()
    }

    /// Opens a shared connection (TCP and `AUTH`) within `timeout`.
    async fn open(&self, timeout: Duration) -> Result<Mux, DisqueError> {
        let opened = Mux::connect(&self.addr, self.password.as_deref(), timeout).await;
        super::connected(&self.addr, opened)
    }

    /// Open shared connections (a failed one is dropped on the way).
    fn slot(&self) -> MutexGuard<'_, Vec<Mux>> {
        let mut muxes = self.muxes.lock().unwrap_or_else(PoisonError::into_inner);
        if muxes.first().is_some_and(Mux::is_failed) {
            muxes.retain(|mux| !mux.is_failed());
        }
        muxes
    }

    /// How long ago the node last answered on one of its shared
    /// connections, if that is less than `within`.
    pub(crate) fn answered_within(&self, within: Duration) -> Option<Duration> {
        last_answer_ago(&self.slot(), stamp()).filter(|ago| *ago < within)
    }

    /// How many connections are open.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slot().len()
    }

    /// Forgets every connection (commands in flight keep their handles).
    pub(crate) fn clear(&self) {
        self.slot().clear();
    }

    /// Takes every connection, once no first connection is being opened.
    pub(crate) async fn take_all(&self) -> Vec<Mux> {
        let _connecting = self.connecting.lock().await;
        std::mem::take(&mut *self.slot())
    }
}

/// How long ago the node last answered on any of `muxes` (`now` a
/// [`stamp`]); `None` before its first reply.
fn last_answer_ago(muxes: &[Mux], now: u64) -> Option<Duration> {
    let latest = muxes.iter().map(Mux::last_reply).max()?;
    (latest != 0).then(|| Duration::from_micros(now.saturating_sub(latest)))
}
