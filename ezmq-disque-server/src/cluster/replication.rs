//! Replication of jobs between the nodes of an embedded cluster: REPLJOB /
//! GOTJOB (synchronous and ASYNC ADDJOB), SETACK / GOTACK (ACKJOB and
//! dummy ACKs), DELJOB (FASTACK), QUEUED / WILLQUEUE (who requeues a job
//! whose retry time passed) and WORKING.

use super::messages::{merge_nodes, JobData, Msg};
use crate::cmd::{Outcome, Replicating};
use crate::frame::Frame;
use crate::job::{Job, JobId, JobState};
use crate::state::{Node, Store};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// A replica requeues this much later than the node that queued the job,
/// so that node normally wins and tells the others (QUEUED).
pub(crate) const REPLICA_SLACK_MS: u64 = 200;
/// How long a node waits for QUEUED answers after sending WILLQUEUE.
pub(crate) const WILLQUEUE_WAIT_MS: u64 = 100;
/// Lifetime of a dummy ACK.
const DUMMY_ACK_MS: u64 = 1_000;

/// A job waiting for replicas to confirm their copy.
#[derive(Debug)]
pub(crate) struct ReplWait {
    /// Nodes asked to store a copy.
    pub(super) contacted: Vec<u16>,
    /// The blocked ADDJOB client (synchronous replication only).
    pub(super) tx: Option<oneshot::Sender<Frame>>,
    pub(super) since: u64,
    pub(super) last_send: u64,
    /// When the last node was added to `contacted` (synchronous ADDJOB:
    /// Disque's `added_node_time`).
    pub(super) last_add: u64,
    /// Added on a leaving node: `repl` other nodes hold the job, one of
    /// them queues it, and this node drops its copy once they confirmed.
    pub(super) external: bool,
}

/// An acked job waiting for the other holders to drop their copy.
#[derive(Debug)]
pub(crate) struct AckWait {
    pub(super) confirmed: Vec<u16>,
    pub(super) last_send: u64,
}

fn noreply_removed() -> Frame {
    Frame::error(
        "NOREPL job removed (expired?) before the requested replication level was achieved",
    )
}

fn noreply_timeout() -> Frame {
    Frame::error("NOREPL Timeout reached before replicating to the requested number of nodes")
}

/// Registers a job of a cluster ADDJOB with REPLICATE > 1 and sends the
/// copies. Synchronous: the job waits in `wait-repl` and the client blocks
/// until enough nodes confirm (or the timeout). ASYNC: queued at once.
///
/// `external` (the node is leaving the cluster, Disque's external
/// replication): `repl` *other* nodes get the job, one of them queues it, and
/// this node keeps its copy only until they confirmed (an ASYNC client gets
/// its reply at once all the same).
pub(crate) fn add_replicated(
    store: &mut Store,
    mut job: Job,
    sync: bool,
    timeout_ms: u64,
    now: u64,
    external: bool,
) -> Outcome {
    let Some(link) = store.link.clone() else {
        return Outcome::Reply(noreply_removed());
    };
    let id = job.id;
    let delay = job.delay;
    let planned_qtime = job.qtime;
    let reply_now = !sync;
    let sync = sync || external;
    job.nodes = if external { Vec::new() } else { vec![link.me] }.into();
    if sync {
        job.state = JobState::WaitRepl;
        job.qtime = 0;
    }
    let mut data = JobData::of(&job);
    data.qtime = planned_qtime;
    let need = usize::from(job.repl).saturating_sub(usize::from(!external));
    store.register_job(job);
    if !sync && delay == 0 {
        store.enqueue(id, false, now);
    }
    let mut peers = link.bus.replication_peers(link.me);
    for i in (1..peers.len()).rev() {
        let j = (store.rng.next_u64() % (i as u64 + 1)) as usize;
        peers.swap(i, j);
    }
    peers.truncate(need);
    data.nodes = if external {
        peers.clone()
    } else {
        std::iter::once(link.me)
            .chain(peers.iter().copied())
            .collect()
    };
    for &p in &peers {
        link.send(p, Msg::ReplJob(Box::new(data.clone())));
    }
    let (tx, rx) = if sync && !reply_now {
        let (tx, rx) = oneshot::channel();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    store.repl_wait.insert(
        id,
        ReplWait {
            contacted: peers,
            tx,
            since: now,
            last_send: now,
            last_add: now,
            external,
        },
    );
    match rx {
        Some(rx) => Outcome::Replicate(Replicating { id, rx, timeout_ms }),
        None => Outcome::Reply(Frame::Status(id.to_bytes())),
    }
}

/// Waits for the replication of a synchronous ADDJOB. On timeout the job is
/// removed from every node and the client gets `-NOREPL`.
pub(crate) async fn wait_replicated(node: &Node, pending: Replicating) -> Frame {
    let Replicating {
        id,
        mut rx,
        timeout_ms,
    } = pending;
    let deadline = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms));
    let timer = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        r = &mut rx => r.unwrap_or_else(|_| noreply_removed()),
        _ = timer => {
            if abandon(node, id) {
                noreply_timeout()
            } else {
                rx.try_recv().unwrap_or_else(|_| noreply_removed())
            }
        }
    }
}

/// Forgets a job still waiting for synchronous replication (timeout, or its
/// client went away): it is removed here and from every contacted node.
/// Returns false when it was no longer waiting.
pub(crate) fn abandon(node: &Node, id: JobId) -> bool {
    let mut store = node.store();
    let Some(w) = store.repl_wait.remove(&id) else {
        return false;
    };
    let mut nodes = w.contacted;
    if let Some(job) = store.jobs.get(&id) {
        merge_nodes(&mut nodes, &job.nodes);
    }
    store.delete_job(&id);
    if let Some(link) = &store.link {
        link.send_each(&nodes, || Msg::DelJob(id));
    }
    true
}

impl Store {
    /// Tells the other holders that the job is queued here (QUEUED).
    pub(crate) fn notify_queued(&self, id: JobId) {
        let (Some(link), Some(job)) = (&self.link, self.jobs.get(&id)) else {
            return;
        };
        let (nacks, deliveries) = (job.nacks, job.deliveries);
        link.send_each(&job.nodes, || Msg::Queued {
            id,
            nacks,
            deliveries,
        });
    }

    /// The retry time of an active job passed: ask the other holders
    /// (WILLQUEUE) and queue it after a short wait unless one of them
    /// answers QUEUED.
    pub(crate) fn will_queue(&mut self, id: JobId, now: u64) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.willqueue = true;
        job.qtime = now + WILLQUEUE_WAIT_MS;
        if let Some(link) = &self.link {
            link.send_each(&job.nodes, || Msg::WillQueue(id));
        }
    }

    fn postpone(&mut self, id: JobId, now: u64) {
        if let Some(job) = self.jobs.get_mut(&id) {
            job.willqueue = false;
            if job.retry > 0 && job.qtime != 0 {
                job.qtime = now + u64::from(job.retry) * 1000 + REPLICA_SLACK_MS;
            }
        }
        self.schedule(id);
    }

    /// REPLJOB: store a copy (ignored when the queue is paused in input).
    pub(crate) fn on_repljob(&mut self, from: u16, data: JobData) {
        let Some(link) = self.link.clone() else {
            return;
        };
        if self.queues.get(&data.queue).is_some_and(|q| q.paused_in) {
            return;
        }
        let id = data.id;
        if let Some(job) = self.jobs.get_mut(&id) {
            job.nodes.merge(&data.nodes);
        } else {
            let qtime = if data.qtime == 0 {
                0
            } else {
                data.qtime + REPLICA_SLACK_MS
            };
            let queued_before = data.delay == 0;
            let job = data.into_job(link.me, qtime, queued_before);
            self.register_job(job);
        }
        link.send(from, Msg::GotJob(id));
    }

    /// GOTJOB: one more copy; completes the ADDJOB once `repl` nodes hold it.
    pub(crate) fn on_gotjob(&mut self, from: u16, id: JobId, now: u64) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        if !job.nodes.contains(&from) {
            job.nodes.push(from);
        }
        if job.nodes.len() < usize::from(job.repl) {
            return;
        }
        let Some(wait) = self.repl_wait.remove(&id) else {
            return;
        };
        if wait.external {
            // Added on this leaving node: one holder queues it, and this
            // node keeps no copy.
            if job.delay == 0 {
                if let (Some(link), Some(&first)) = (&self.link, job.nodes.first()) {
                    link.send(first, Msg::QueueJob(id));
                }
            }
            self.delete_job(&id);
            if let Some(tx) = wait.tx {
                let _ = tx.send(Frame::Status(id.to_bytes()));
            }
            return;
        }
        if job.state == JobState::WaitRepl {
            job.state = JobState::Active;
            // Disque sets the queue time at ADDJOB and keeps it through the
            // replication (`jobReplicationAchieved` only wakes the job): a
            // delayed job is due its delay after it was added, not after
            // its copies were confirmed.
            let added = job.ctime / 1_000_000;
            job.qtime = if job.delay > 0 {
                added + u64::from(job.delay) * 1000
            } else {
                now + u64::from(job.retry) * 1000
            };
            let delay = job.delay;
            self.schedule(id);
            if delay == 0 {
                self.enqueue(id, false, now);
            }
        }
        if let Some(tx) = wait.tx {
            let _ = tx.send(Frame::Status(id.to_bytes()));
        }
    }

    /// SETACK: drop the copy and confirm.
    pub(crate) fn on_setack(&mut self, from: u16, id: JobId) {
        if self.jobs.get(&id).is_some_and(|j| !j.dummy) {
            self.delete_job(&id);
        }
        if let Some(link) = &self.link {
            link.send(from, Msg::GotAck(id));
        }
    }

    /// GOTACK: `from` dropped its copy of a job acked here.
    pub(crate) fn on_gotack(&mut self, from: u16, id: JobId) {
        if let Some(w) = self.acking.get_mut(&id) {
            if !w.confirmed.contains(&from) {
                w.confirmed.push(from);
            }
        }
    }

    /// QUEUED: the job is queued on `from`.
    pub(crate) fn on_queued(
        &mut self,
        from: u16,
        id: JobId,
        nacks: u32,
        deliveries: u32,
        now: u64,
    ) {
        let Some(link) = self.link.clone() else {
            return;
        };
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.nacks = job.nacks.max(nacks);
        job.deliveries = job.deliveries.max(deliveries);
        if !job.nodes.contains(&from) {
            job.nodes.push(from);
        }
        match job.state {
            // Queued on both: the node with the greater id keeps it.
            JobState::Queued if link.bus.id(from) > link.bus.id(link.me) => {
                self.dequeue(&id);
                self.postpone(id, now);
            }
            JobState::Active => self.postpone(id, now),
            _ => {}
        }
    }

    /// WILLQUEUE: answer QUEUED when the job is queued here (SETACK when it
    /// is acked).
    pub(crate) fn on_willqueue(&mut self, from: u16, id: JobId) {
        let (Some(link), Some(job)) = (&self.link, self.jobs.get(&id)) else {
            return;
        };
        match job.state {
            JobState::Queued => {
                link.send(
                    from,
                    Msg::Queued {
                        id,
                        nacks: job.nacks,
                        deliveries: job.deliveries,
                    },
                );
            }
            JobState::Acked if !job.dummy => {
                link.send(from, Msg::SetAck(id));
            }
            _ => {}
        }
    }

    /// QUEUEJOB: a leaving node added this job and asks this node to queue
    /// it (the first queueing, not an additional delivery).
    pub(crate) fn on_queuejob(&mut self, id: JobId, now: u64) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        if job.state != JobState::Active {
            return;
        }
        if job.nacks == 0 && job.deliveries == 0 {
            job.queued_before = false;
        }
        if job.qtime == 0 {
            job.qtime = now;
        }
        self.enqueue(id, false, now);
    }

    /// WORKING from another node: dequeue and postpone the requeue.
    pub(crate) fn on_working(&mut self, id: JobId, now: u64) {
        if !self.jobs.contains_key(&id) {
            return;
        }
        self.dequeue(&id);
        self.postpone(id, now);
    }

    /// ACKJOB in a cluster: replicated jobs become `acked` until every other
    /// holder confirms; unknown at-least-once ids get a dummy ACK that is
    /// broadcast. Returns the number of known jobs.
    pub(crate) fn cluster_ack(&mut self, ids: &[JobId], now: u64) -> i64 {
        let Some(link) = self.link.clone() else {
            return 0;
        };
        let mut n = 0;
        for &id in ids {
            match self.jobs.get(&id) {
                Some(job) if job.dummy => {}
                Some(job) => {
                    n += 1;
                    if job.state == JobState::Acked {
                        continue;
                    }
                    if job.nodes.iter().all(|&x| x == link.me) {
                        self.delete_job(&id);
                        continue;
                    }
                    self.dequeue(&id);
                    let nodes = match self.jobs.get_mut(&id) {
                        Some(job) => {
                            job.state = JobState::Acked;
                            job.qtime = 0;
                            job.willqueue = false;
                            job.nodes.to_vec()
                        }
                        None => continue,
                    };
                    self.schedule(id);
                    self.acking.insert(
                        id,
                        AckWait {
                            confirmed: Vec::new(),
                            last_send: now,
                        },
                    );
                    link.send_each(&nodes, || Msg::SetAck(id));
                }
                None if Job::id_has_retry(&id) => {
                    let ctime = self.new_ctime(now);
                    let dummy = Job {
                        id,
                        queue: crate::job::QName::from(&[][..]),
                        body: crate::body::Body::copy_from(b""),
                        state: JobState::Acked,
                        repl: 0,
                        ctime,
                        etime: now + DUMMY_ACK_MS,
                        delay: 0,
                        retry: 0,
                        qtime: 0,
                        nacks: 0,
                        deliveries: 0,
                        delivered: false,
                        queued_before: false,
                        timer: 0,
                        nodes: Default::default(),
                        dummy: true,
                        willqueue: false,
                    };
                    self.register_job(dummy);
                    link.broadcast(|| Msg::SetAck(id));
                }
                None => {}
            }
        }
        n
    }

    /// FASTACK in a cluster: delete here and tell every reachable node.
    pub(crate) fn cluster_fastack(&mut self, ids: &[JobId]) -> i64 {
        let Some(link) = self.link.clone() else {
            return 0;
        };
        let mut n = 0;
        for id in ids {
            if self.delete_job(id) {
                n += 1;
            }
            let id = *id;
            link.broadcast(|| Msg::DelJob(id));
        }
        n
    }

    /// WORKING in a cluster: tell the other holders.
    pub(crate) fn notify_working(&self, id: JobId) {
        if let (Some(link), Some(job)) = (&self.link, self.jobs.get(&id)) {
            link.send_each(&job.nodes, || Msg::Working(id));
        }
    }
}
