//! The node and its store: jobs, queues, timers and blocked clients, all
//! behind one `std::sync::Mutex` (never held across an `.await`). Timer
//! events are run in `timers`, blocked clients served in
//! `waiters`.

use crate::clients::Clients;
use crate::cluster::{AckWait, Link, ReplWait};
use crate::frame::Frame;
use crate::job::{Job, JobId, JobState, QName, Rng};
use crate::jobtable::{key, key_slot, JobTable, Key, Slot};
use crate::limits::QueryBudget;
use crate::persist::AofLog;
use crate::queue::Queue;
use crate::settings::{AuthState, Settings};
use crate::stats::{SlowLog, Stats};
use crate::timers::{now_ms, now_s};
use crate::waiters::Waiter;
use crate::ServerConfig;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Empty queues idle for this long are reclaimed.
pub(crate) const QUEUE_GC_IDLE_S: u64 = 300;

/// One Disque node: identity, limits and the store.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) id: String,
    pub(crate) port: u16,
    /// The configuration the node was started with.
    pub(crate) config: ServerConfig,
    pub(crate) auth: AuthState,
    pub(crate) settings: Settings,
    pub(crate) clients: Arc<Clients>,
    pub(crate) stats: Stats,
    pub(crate) slowlog: SlowLog,
    pub(crate) max_memory: usize,
    pub(crate) max_request: usize,
    pub(crate) started_s: u64,
    pub(crate) connected_clients: AtomicUsize,
    /// Input buffered by all connections together.
    pub(crate) query_budget: QueryBudget,
    /// Drop a client whose partial request makes no progress this long
    /// (zero = never).
    pub(crate) stall_timeout: Duration,
    /// The cluster bus, `None` for a standalone node.
    pub(crate) link: Option<Link>,
    /// The append-only log, when persistence is on.
    pub(crate) aof: Option<Arc<AofLog>>,
    store: Mutex<Store>,
}

impl Node {
    /// A node with an empty store.
    pub(crate) fn new(
        id: String,
        port: u16,
        config: &ServerConfig,
        link: Option<Link>,
        aof: Option<Arc<AofLog>>,
    ) -> Node {
        let max_request = config.max_request_bytes.max(1024);
        let budget = match config.max_query_buffers_bytes {
            0 => 0,
            n => n.max(max_request.saturating_add(64 * 1024)),
        };
        let mut prefix = [b'0'; 8];
        for (d, s) in prefix.iter_mut().zip(id.bytes()) {
            *d = s;
        }
        let mut store = Store::new(prefix, link.clone());
        store.aof = aof.clone();
        Node {
            store: Mutex::new(store),
            link,
            aof,
            id,
            port,
            config: config.clone(),
            auth: AuthState::new(config.requirepass.clone()),
            settings: Settings::default(),
            clients: Arc::new(Clients::new()),
            stats: Stats::new(),
            slowlog: SlowLog::new(),
            max_memory: config.max_memory_bytes,
            max_request,
            started_s: now_s(),
            connected_clients: AtomicUsize::new(0),
            query_budget: QueryBudget::new(budget),
            stall_timeout: config.request_stall_timeout,
        }
    }

    /// Bytes appended to the append-only log so far (0 without one).
    pub(crate) fn aof_appended(&self) -> u64 {
        self.aof.as_ref().map_or(0, |a| a.appended())
    }

    /// Waits while this cluster node is hung or frozen
    /// ([`crate::EmbeddedCluster::hang`], [`crate::EmbeddedCluster::freeze`]);
    /// false when `stop` completed first. Costs one flag read when the node
    /// runs.
    pub(crate) async fn wait_resumed(&self, stop: impl std::future::Future<Output = ()>) -> bool {
        let Some(link) = &self.link else {
            return true;
        };
        if !link.bus.is_paused(link.me) {
            return true;
        }
        tokio::select! {
            () = link.bus.resumed(link.me) => true,
            () = stop => false,
        }
    }

    /// Locks the store (recovering from a poisoned lock).
    pub(crate) fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// All the mutable state of a node.
#[derive(Debug)]
pub(crate) struct Store {
    pub(crate) prefix: [u8; 8],
    /// Every job, by id and by slot.
    pub(crate) jobs: JobTable,
    pub(crate) queues: HashMap<Bytes, Queue>,
    pub(crate) queue_scan: BTreeMap<u64, Bytes>,
    /// `(due time, slot)` of every scheduled job.
    pub(crate) timers: BTreeSet<Key>,
    pub(crate) waiters: HashMap<u64, Waiter>,
    pub(crate) next_seq: u64,
    pub(crate) prev_ctime: u64,
    pub(crate) rng: Rng,
    pub(crate) used_memory: usize,
    /// The cluster bus, `None` for a standalone node.
    pub(crate) link: Option<Link>,
    /// Cluster only: jobs waiting for replicas to confirm their copy.
    pub(crate) repl_wait: HashMap<JobId, ReplWait>,
    /// Cluster only: acked jobs waiting for the other holders to confirm.
    pub(crate) acking: HashMap<JobId, AckWait>,
    /// The append-only log, when persistence is on.
    pub(crate) aof: Option<Arc<AofLog>>,
}

impl Store {
    fn new(prefix: [u8; 8], link: Option<Link>) -> Store {
        Store {
            prefix,
            jobs: JobTable::new(),
            queues: HashMap::new(),
            queue_scan: BTreeMap::new(),
            timers: BTreeSet::new(),
            waiters: HashMap::new(),
            next_seq: 1,
            prev_ctime: 0,
            rng: Rng::new(),
            used_memory: 0,
            link,
            repl_wait: HashMap::new(),
            acking: HashMap::new(),
            aof: None,
        }
    }

    pub(crate) fn seq(&mut self) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    /// A new, strictly increasing ctime (ms * 1e6 + counter).
    pub(crate) fn new_ctime(&mut self, now: u64) -> u64 {
        let mut c = now.saturating_mul(1_000_000);
        if c <= self.prev_ctime {
            c = self.prev_ctime + 1;
        }
        self.prev_ctime = c;
        c
    }

    /// Looks a queue up, creating it when missing.
    pub(crate) fn queue_mut(&mut self, name: &[u8]) -> &mut Queue {
        self.queue_for(name, None)
    }

    /// Looks a queue up, creating it when missing with `shared` (when
    /// given) as the interned name its jobs hold.
    fn queue_for(&mut self, name: &[u8], shared: Option<&QName>) -> &mut Queue {
        let key = match self.queues.get_key_value(name) {
            Some((k, _)) => k.clone(),
            None => {
                // Copy the name so it does not pin a whole request buffer.
                let owned = Bytes::copy_from_slice(name);
                let seq = self.seq();
                self.queue_scan.insert(seq, owned.clone());
                let shared = shared.cloned().unwrap_or_else(|| QName::from(name));
                self.queues.insert(
                    owned.clone(),
                    Queue::new(owned.clone(), shared, now_s(), seq),
                );
                owned
            }
        };
        // The entry exists now.
        self.queues
            .entry(key.clone())
            .or_insert_with(|| Queue::new(key, QName::from(name), 0, 0))
    }

    /// Registers a freshly created job and schedules it.
    pub(crate) fn register_job(&mut self, job: Job) -> Slot {
        self.used_memory += job.mem_size();
        let id = job.id;
        if let Some(aof) = &self.aof {
            aof.job(&job);
        }
        if self.jobs.contains_key(&id) {
            // Not for fresh ids: keep the queue and timer indexes consistent.
            self.delete_job(&id);
        }
        let slot = self.jobs.insert(job);
        self.schedule_slot(slot);
        slot
    }

    /// Logs the mutable fields of a job (persistence on).
    pub(crate) fn log_state(&self, id: &JobId) {
        if let Some(aof) = &self.aof {
            if let Some(job) = self.jobs.get(id) {
                aof.state(job);
            }
        }
    }

    /// Registers the jobs read from the append-only log (nothing is
    /// logged). Jobs that were queued are queued again at once; the others
    /// wait for their delay or retry time as if the server had not stopped
    /// (when it has passed, the next timer tick queues them).
    pub(crate) fn restore(&mut self, jobs: Vec<Job>, now: u64) {
        let aof = self.aof.take();
        // One shared name per queue, also for jobs that are not queued.
        let mut names: HashMap<QName, ()> = HashMap::new();
        for mut job in jobs {
            match names.get_key_value(&job.queue) {
                Some((name, _)) => job.queue = name.clone(),
                None => {
                    names.insert(job.queue.clone(), ());
                }
            }
            if job.etime <= now || job.dummy {
                continue;
            }
            self.prev_ctime = self.prev_ctime.max(job.ctime);
            let queued = job.state == JobState::Queued;
            job.state = JobState::Active;
            let id = job.id;
            self.register_job(job);
            if queued {
                let Some(slot) = self.jobs.slot_of(&id) else {
                    continue;
                };
                let Some(job) = self.jobs.at_mut(slot) else {
                    continue;
                };
                job.state = JobState::Queued;
                let key = key(job.ctime, slot);
                let qname = job.queue.clone();
                let q = self.queue_for(&qname, Some(&qname));
                q.jobs.insert(key);
                let name = q.shared.clone();
                if let Some(job) = self.jobs.get_mut(&id) {
                    job.queue = name;
                }
            }
        }
        self.aof = aof;
    }

    /// Removes a job completely. Returns true if it existed.
    pub(crate) fn delete_job(&mut self, id: &JobId) -> bool {
        let Some(slot) = self.jobs.slot_of(id) else {
            return false;
        };
        // Out of every queue and timer before the slot can be reused.
        let Some(job) = self.jobs.at(slot) else {
            return false;
        };
        if job.state == JobState::Queued {
            if let Some(q) = self.queues.get_mut(&job.queue[..]) {
                q.jobs.remove(&key(job.ctime, slot));
            }
        }
        if job.timer != 0 {
            self.timers.remove(&key(job.timer, slot));
        }
        let Some(job) = self.jobs.remove(id) else {
            return false;
        };
        if self.link.is_some() {
            self.repl_wait.remove(id);
            self.acking.remove(id);
        }
        self.used_memory = self.used_memory.saturating_sub(job.mem_size());
        if let Some(aof) = &self.aof {
            aof.del(id);
        }
        true
    }

    /// Recomputes the timer entry of a job.
    pub(crate) fn schedule(&mut self, id: JobId) {
        let Some(slot) = self.jobs.slot_of(&id) else {
            return;
        };
        self.schedule_slot(slot);
    }

    /// Recomputes the timer entry of the job in `slot`.
    pub(crate) fn schedule_slot(&mut self, slot: Slot) {
        let Some(job) = self.jobs.at_mut(slot) else {
            return;
        };
        let at = job.next_event();
        if at == job.timer {
            return;
        }
        if job.timer != 0 {
            self.timers.remove(&key(job.timer, slot));
        }
        job.timer = at;
        self.timers.insert(key(at, slot));
    }

    /// Puts a job into its queue (Disque `enqueueJob`). Returns false when
    /// the job is already queued or may not be queued again.
    pub(crate) fn enqueue(&mut self, id: JobId, nack: bool, now: u64) -> bool {
        match self.jobs.slot_of(&id) {
            Some(slot) => self.enqueue_slot(slot, nack, now),
            None => false,
        }
    }

    /// [`Store::enqueue`] for the job in `slot`.
    pub(crate) fn enqueue_slot(&mut self, slot: Slot, nack: bool, now: u64) -> bool {
        let Some(job) = self.jobs.at_mut(slot) else {
            return false;
        };
        let id = job.id;
        if job.state == JobState::Queued || job.qtime == 0 {
            return false;
        }
        if job.retry == 0 && job.delivered {
            return false;
        }
        job.state = JobState::Queued;
        job.qtime = if job.retry > 0 {
            now + u64::from(job.retry) * 1000
        } else {
            0
        };
        if job.queued_before || nack {
            if nack {
                job.nacks = job.nacks.saturating_add(1);
            } else {
                job.deliveries = job.deliveries.saturating_add(1);
            }
        } else {
            job.queued_before = true;
        }
        job.willqueue = false;
        let qkey = key(job.ctime, slot);
        let qname = job.queue.clone();
        if self.link.is_some() && job.nodes.len() > 1 {
            self.notify_queued(id);
        }
        self.schedule_slot(slot);
        self.log_state(&id);
        let q = self.queue_for(&qname, Some(&qname));
        q.jobs.insert(qkey);
        q.atime = now / 1000;
        q.jobs_in += 1;
        if !q.paused_out && !q.blocked.is_empty() {
            self.serve_waiters(&qname, now);
        }
        true
    }

    /// Takes a queued job out of its queue, making it active.
    pub(crate) fn dequeue(&mut self, id: &JobId) -> bool {
        let Some(slot) = self.jobs.slot_of(id) else {
            return false;
        };
        let Some(job) = self.jobs.at_mut(slot) else {
            return false;
        };
        if job.state != JobState::Queued {
            return false;
        }
        job.state = JobState::Active;
        let qkey = key(job.ctime, slot);
        if let Some(q) = self.queues.get_mut(&job.queue[..]) {
            q.jobs.remove(&qkey);
        }
        self.log_state(id);
        true
    }

    /// Pops the oldest job of a queue for delivery (unless paused in
    /// output) and returns its GETJOB reply element.
    pub(crate) fn fetch_entry(
        &mut self,
        qname: &[u8],
        now: u64,
        withcounters: bool,
    ) -> Option<Frame> {
        let slot = self.fetch_slot(qname, now)?;
        self.jobs.at(slot).map(|j| entry(j, withcounters))
    }

    fn fetch_slot(&mut self, qname: &[u8], now: u64) -> Option<Slot> {
        let q = self.queues.get_mut(qname)?;
        if q.paused_out {
            return None;
        }
        let slot = key_slot(&q.jobs.pop_first()?);
        q.atime = now / 1000;
        q.jobs_out += 1;
        let job = self.jobs.at_mut(slot)?;
        job.state = JobState::Active;
        job.delivered = true;
        if let Some(aof) = &self.aof {
            aof.state(job);
        }
        Some(slot)
    }

    /// The GETJOB reply element for a job.
    pub(crate) fn job_entry(&self, id: &JobId, withcounters: bool) -> Frame {
        self.jobs
            .get(id)
            .map_or(Frame::NullArray, |j| entry(j, withcounters))
    }

    /// Creates, registers and (unless delayed) queues a job.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add_job(
        &mut self,
        queue: Bytes,
        body: crate::body::Body,
        repl: u16,
        ttl: i64,
        retry: i64,
        delay: i64,
        now: u64,
    ) -> JobId {
        let job = self.build_job(queue, body, repl, ttl, retry, delay, now);
        let id = job.id;
        let slot = self.register_job(job);
        if delay == 0 {
            self.enqueue_slot(slot, false, now);
        }
        id
    }

    /// A new job (not registered yet) in state `active`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build_job(
        &mut self,
        queue: Bytes,
        body: crate::body::Body,
        repl: u16,
        ttl: i64,
        retry: i64,
        delay: i64,
        now: u64,
    ) -> Job {
        // Share the name of an existing queue; a job alone does not create
        // its queue (it is created when the job is first queued).
        let queue = match self.queues.get(&queue[..]) {
            Some(q) => q.shared.clone(),
            None => QName::from(&queue[..]),
        };
        let prefix = self.prefix;
        let id = JobId::generate(&prefix, &mut self.rng, ttl, retry);
        let ctime = self.new_ctime(now);
        let (ttl, retry, delay) = (ttl as u64, retry as u64, delay as u64);
        let mut job = Job::new(
            id,
            queue,
            body,
            repl,
            ctime,
            now.saturating_add(ttl.saturating_mul(1000)),
            delay,
            retry,
        );
        job.qtime = if delay > 0 {
            now + delay * 1000
        } else {
            now + retry * 1000
        };
        job
    }
}

/// Current time helper re-exported for command code.
pub(crate) fn now() -> u64 {
    now_ms()
}

/// The GETJOB reply element for a job.
fn entry(job: &Job, withcounters: bool) -> Frame {
    let mut v = Vec::with_capacity(if withcounters { 7 } else { 3 });
    v.push(Frame::Bulk(Bytes::copy_from_slice(&job.queue)));
    v.push(Frame::Bulk(job.id.to_bytes()));
    v.push(Frame::Bulk(job.body.to_bytes()));
    if withcounters {
        v.push(Frame::bulk_static("nacks"));
        v.push(Frame::Integer(job.nacks as i64));
        v.push(Frame::bulk_static("additional-deliveries"));
        v.push(Frame::Integer(job.deliveries as i64));
    }
    Frame::Array(v)
}
