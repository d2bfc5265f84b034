//! Clock helpers and the background task that runs job timers (delay,
//! retry requeue, TTL expiry) and reclaims idle queues.

use crate::job::JobState;
use crate::jobtable::{key_slot, key_time};
use crate::state::{Node, Store, QUEUE_GC_IDLE_S};
use bytes::Bytes;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

/// How often due job events are looked for.
pub(crate) const TICK: Duration = Duration::from_millis(10);
/// Timer slack: events fire once the earliest of them has been due this
/// long (ms), all together with every event due by then. So jobs whose
/// deadlines are a few milliseconds apart (added or delivered together)
/// take effect together, and no event fires more than `SLACK_MS` + [`TICK`]
/// late, never early.
pub(crate) const SLACK_MS: u64 = 50;

/// Unix time in milliseconds.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Unix time in seconds.
pub(crate) fn now_s() -> u64 {
    now_ms() / 1000
}

/// Runs until `token` is cancelled.
pub(crate) async fn run(node: Arc<Node>, token: CancellationToken) {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_gc = 0u64;
    loop {
        tokio::select! {
            _ = token.cancelled() => return,
            _ = interval.tick() => {}
        }
        // A hung or frozen cluster node runs no timer (a stopped process).
        if !node.wait_resumed(token.cancelled()).await {
            return;
        }
        let now = now_ms();
        let mut store = node.store();
        if store
            .next_timer()
            .is_some_and(|at| at.saturating_add(SLACK_MS) <= now)
        {
            store.process_timers(now);
        }
        let rewrite_due = node.aof.as_ref().is_some_and(|a| {
            a.stats
                .rewrite_scheduled
                .load(std::sync::atomic::Ordering::Relaxed)
        });
        if rewrite_due {
            let _ = crate::persist::rewrite::start(&mut store);
        }
        if now / 1000 != last_gc {
            last_gc = now / 1000;
            store.gc_queues(last_gc);
        }
    }
}

impl Store {
    /// When the earliest timer event is due (ms), if any.
    fn next_timer(&self) -> Option<u64> {
        self.timers.first().map(key_time)
    }

    /// Runs every due timer event (delays, retries, expiry).
    pub(crate) fn process_timers(&mut self, now: u64) {
        while let Some(k) = self.timers.first() {
            let (at, slot) = (key_time(k), key_slot(k));
            if at > now {
                break;
            }
            self.timers.pop_first();
            let Some(job) = self.jobs.at_mut(slot) else {
                continue;
            };
            let id = job.id;
            job.timer = 0;
            if job.etime <= now {
                self.delete_job(&id);
                continue;
            }
            if job.state == JobState::Active && job.qtime != 0 && job.qtime <= now {
                let paused_in =
                    job.retry != 0 && self.queues.get(&job.queue[..]).is_some_and(|q| q.paused_in);
                if paused_in {
                    job.qtime = now + u64::from(job.retry) * 1000;
                } else if self.link.is_some() && job.nodes.len() > 1 && !job.willqueue {
                    // Ask the other holders first: one of them may have
                    // the job queued already.
                    self.will_queue(id, now);
                } else {
                    self.enqueue(id, false, now);
                }
            }
            if let Some(job) = self.jobs.get_mut(&id) {
                if job.state == JobState::Queued
                    && job.qtime != 0
                    && job.qtime <= now
                    && job.retry > 0
                {
                    job.qtime = now + u64::from(job.retry) * 1000;
                }
            }
            self.schedule(id);
        }
    }

    /// Removes empty queues idle for more than [`QUEUE_GC_IDLE_S`].
    pub(crate) fn gc_queues(&mut self, now_s: u64) {
        let dead: Vec<Bytes> = self
            .queues
            .values()
            .filter(|q| {
                q.jobs.is_empty()
                    && q.blocked.is_empty()
                    && !q.paused_in
                    && !q.paused_out
                    && now_s.saturating_sub(q.atime) > QUEUE_GC_IDLE_S
            })
            .map(|q| q.name.clone())
            .collect();
        for name in dead {
            if let Some(q) = self.queues.remove(&name) {
                self.queue_scan.remove(&q.seq);
            }
        }
    }
}
