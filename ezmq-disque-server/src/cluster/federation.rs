//! Federation: a node whose GETJOB clients find no local job asks the other
//! nodes (NEEDJOBS) and they move queued jobs to it (YOURJOBS). Unlike real
//! Disque's backoff (seconds), blocked queues are asked for again on every
//! cluster tick, so a job added on another node reaches a blocked consumer
//! within about [`super::CLUSTER_TICK`].

use super::messages::{JobData, Msg};
use super::replication::REPLICA_SLACK_MS;
use crate::job::{JobId, JobState};
use crate::state::Store;
use bytes::Bytes;
use std::collections::HashMap;

impl Store {
    /// Sends NEEDJOBS for each of `queues` (not paused in output) to every
    /// reachable node.
    pub(crate) fn need_jobs(&self, queues: &[Bytes]) {
        let Some(link) = &self.link else {
            return;
        };
        for (i, q) in queues.iter().enumerate() {
            if queues[..i].contains(q) || self.queues.get(q).is_some_and(|q| q.paused_out) {
                continue;
            }
            let queue = Bytes::copy_from_slice(q);
            link.broadcast(|| Msg::NeedJobs {
                queue: queue.clone(),
                count: 1,
            });
        }
    }

    /// Repeats NEEDJOBS for every queue that has blocked clients and no job.
    pub(crate) fn federation_tick(&self) {
        let Some(link) = &self.link else {
            return;
        };
        if self.waiters.is_empty() {
            return;
        }
        let mut wanted: HashMap<&Bytes, usize> = HashMap::new();
        for w in self.waiters.values() {
            for name in &w.queues {
                if wanted.contains_key(name) {
                    continue;
                }
                if let Some(q) = self.queues.get(name) {
                    if q.jobs.is_empty() && !q.paused_out {
                        wanted.insert(&q.name, q.blocked.len());
                    }
                }
            }
        }
        for (queue, count) in wanted {
            link.broadcast(|| Msg::NeedJobs {
                queue: queue.clone(),
                count,
            });
        }
    }

    /// NEEDJOBS: move up to `count` queued jobs of `queue` to `from`. This
    /// node keeps an `active` copy (it becomes a replica) unless the job is
    /// at-most-once.
    pub(crate) fn on_needjobs(&mut self, from: u16, queue: &Bytes, count: usize, now: u64) {
        let Some(link) = self.link.clone() else {
            return;
        };
        let Some(q) = self.queues.get(queue) else {
            return;
        };
        if q.paused_out || q.jobs.is_empty() || !link.bus.reachable_peers(link.me).contains(&from) {
            return;
        }
        let ids: Vec<JobId> = q
            .jobs
            .iter()
            .take(count.max(1))
            .map(|k| self.jobs.id_at(crate::jobtable::key_slot(k)))
            .collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            self.dequeue(&id);
            let Some(job) = self.jobs.get_mut(&id) else {
                continue;
            };
            if !job.nodes.contains(&link.me) {
                job.nodes.push(link.me);
            }
            if !job.nodes.contains(&from) {
                job.nodes.push(from);
            }
            let mut data = JobData::of(job);
            if job.retry == 0 {
                data.nodes = Vec::new();
                self.delete_job(&id);
            } else {
                job.willqueue = false;
                job.qtime = now + u64::from(job.retry) * 1000 + REPLICA_SLACK_MS;
                self.schedule(id);
            }
            out.push(data);
        }
        if !out.is_empty() {
            link.send(from, Msg::YourJobs(out));
        }
    }

    /// YOURJOBS: queue the jobs moved here (serving blocked clients).
    pub(crate) fn on_yourjobs(&mut self, from: u16, jobs: Vec<JobData>, now: u64) {
        let Some(link) = self.link.clone() else {
            return;
        };
        for data in jobs {
            let id = data.id;
            let qname = data.queue.clone();
            if let Some(job) = self.jobs.get_mut(&id) {
                job.nodes.merge(&data.nodes);
                if !job.nodes.contains(&link.me) {
                    job.nodes.push(link.me);
                }
                job.nacks = job.nacks.max(data.nacks);
                job.deliveries = job.deliveries.max(data.deliveries);
                if job.state != JobState::Active {
                    continue;
                }
                // A move is not an additional delivery.
                job.queued_before = false;
                if job.qtime == 0 {
                    job.qtime = now;
                }
            } else {
                let qtime = now + u64::from(data.retry) * 1000;
                let job = data.into_job(link.me, qtime, false);
                self.register_job(job);
            }
            let q = self.queue_mut(&qname);
            if !q.import_from.contains(&from) {
                q.import_from.push(from);
            }
            q.count_import(now / 1000);
            self.enqueue(id, false, now);
        }
    }
}
