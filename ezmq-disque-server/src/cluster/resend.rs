//! Periodic replication work of a cluster node: REPLJOB resends and new
//! replicas for jobs still waiting for copies (Disque's
//! `clientsCronHandleDelayedJobReplication`), SETACK resends, and removal
//! of acked jobs every holder confirmed.

use super::messages::{merge_nodes, JobData, Msg};
use crate::job::{JobId, JobState};
use crate::state::Store;

/// Resend REPLJOB to silent replicas this often (an ASYNC job also tries
/// more nodes then). A synchronous ADDJOB adds one node every
/// [`BusTiming::repl_retry`](super::BusTiming) instead.
const REPL_RESEND_MS: u64 = 200;
/// Give up replicating an ASYNC job after this long.
const ASYNC_REPL_GIVE_UP_MS: u64 = 60_000;
/// Resend SETACK to nodes that did not confirm this often.
const ACK_RESEND_MS: u64 = 1_000;

impl Store {
    /// Periodic work: resend REPLJOB (trying more nodes when needed) and
    /// SETACK, and delete acked jobs every holder confirmed.
    pub(crate) fn replication_tick(&mut self, now: u64) {
        let Some(link) = self.link.clone() else {
            return;
        };
        let reachable = link.bus.replication_peers(link.me);
        let retry_ms = link.bus.timing().repl_retry.as_millis() as u64;
        let ids: Vec<JobId> = self.repl_wait.keys().copied().collect();
        for id in ids {
            let Some(job) = self.jobs.get(&id) else {
                self.repl_wait.remove(&id);
                continue;
            };
            let Some(w) = self.repl_wait.get_mut(&id) else {
                continue;
            };
            if w.tx.is_none() && now.saturating_sub(w.since) > ASYNC_REPL_GIVE_UP_MS {
                self.repl_wait.remove(&id);
                continue;
            }
            let need = usize::from(job.repl).saturating_sub(job.nodes.len());
            let mut targets: Vec<u16> = Vec::new();
            let resend_due = now.saturating_sub(w.last_send) >= REPL_RESEND_MS;
            if resend_due {
                w.last_send = now;
                targets.extend(
                    w.contacted
                        .iter()
                        .copied()
                        .filter(|n| !job.nodes.contains(n) && reachable.contains(n)),
                );
            }
            let fresh: Vec<u16> = reachable
                .iter()
                .copied()
                .filter(|p| !w.contacted.contains(p) && !job.nodes.contains(p))
                .collect();
            let added: Vec<u16> = if w.tx.is_some() {
                // Synchronous ADDJOB (Disque's
                // clientsCronHandleDelayedJobReplication): a replica has
                // been silent for the retry interval, so one more node,
                // chosen at random, is asked.
                if need > 0 && now.saturating_sub(w.last_add) >= retry_ms && !fresh.is_empty() {
                    let pick = (self.rng.next_u64() % fresh.len() as u64) as usize;
                    w.last_add = now;
                    vec![fresh[pick]]
                } else {
                    Vec::new()
                }
            } else if resend_due {
                // ASYNC: at each resend, up to `need` more nodes as well.
                fresh.into_iter().take(need).collect()
            } else {
                Vec::new()
            };
            for &p in &added {
                w.contacted.push(p);
                if !targets.contains(&p) {
                    targets.push(p);
                }
            }
            if targets.is_empty() {
                continue;
            }
            let mut data = JobData::of(job);
            if job.state == JobState::WaitRepl {
                data.qtime = if job.delay > 0 {
                    now + u64::from(job.delay) * 1000
                } else {
                    now + u64::from(job.retry) * 1000
                };
            }
            merge_nodes(&mut data.nodes, &w.contacted);
            for p in targets {
                link.send(p, Msg::ReplJob(Box::new(data.clone())));
            }
        }
        let ids: Vec<JobId> = self.acking.keys().copied().collect();
        for id in ids {
            let Some(job) = self.jobs.get(&id) else {
                self.acking.remove(&id);
                continue;
            };
            let Some(w) = self.acking.get_mut(&id) else {
                continue;
            };
            let missing: Vec<u16> = job
                .nodes
                .iter()
                .copied()
                .filter(|&n| n != link.me && !w.confirmed.contains(&n) && link.bus.is_up(n))
                .collect();
            if missing.is_empty() {
                self.delete_job(&id);
            } else if now.saturating_sub(w.last_send) >= ACK_RESEND_MS {
                w.last_send = now;
                link.send_each(&missing, || Msg::SetAck(id));
            }
        }
    }
}
