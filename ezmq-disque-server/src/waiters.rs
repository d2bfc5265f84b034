//! Clients blocked in GETJOB: registered on each queue they wait for,
//! served in arrival order as jobs are queued.

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::frame::Frame;
use crate::state::Store;

/// A client blocked in GETJOB.
#[derive(Debug)]
pub(crate) struct Waiter {
    pub(crate) queues: Vec<Bytes>,
    pub(crate) withcounters: bool,
    pub(crate) tx: oneshot::Sender<Frame>,
}

impl Store {
    /// Registers a blocked GETJOB client on every (distinct) queue.
    pub(crate) fn add_waiter(&mut self, waiter: Waiter) -> u64 {
        let wid = self.seq();
        let mut seen: Vec<&Bytes> = Vec::with_capacity(waiter.queues.len());
        let names = waiter.queues.clone();
        for name in &names {
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            self.queue_mut(name).blocked.push_back(wid);
        }
        self.waiters.insert(wid, waiter);
        wid
    }

    /// Forgets a blocked client. Returns true if it was still waiting.
    pub(crate) fn remove_waiter(&mut self, wid: u64) -> bool {
        let Some(w) = self.waiters.remove(&wid) else {
            return false;
        };
        for name in &w.queues {
            if let Some(q) = self.queues.get_mut(name) {
                q.blocked.retain(|&x| x != wid);
            }
        }
        true
    }

    /// Serves clients blocked on a queue while it has jobs.
    pub(crate) fn serve_waiters(&mut self, qname: &[u8], now: u64) {
        loop {
            let Some(q) = self.queues.get_mut(qname) else {
                return;
            };
            if q.paused_out || q.jobs.is_empty() {
                return;
            }
            let Some(wid) = q.blocked.pop_front() else {
                return;
            };
            let Some(w) = self.waiters.remove(&wid) else {
                continue;
            };
            for name in &w.queues {
                if let Some(q) = self.queues.get_mut(name) {
                    q.blocked.retain(|&x| x != wid);
                }
            }
            if w.tx.is_closed() {
                continue;
            }
            let Some(entry) = self.fetch_entry(qname, now, w.withcounters) else {
                return;
            };
            // A send failure means the client just went away: the job stays
            // active and will be requeued after its retry time.
            let _ = w.tx.send(Frame::Array(vec![entry]));
        }
    }
}
