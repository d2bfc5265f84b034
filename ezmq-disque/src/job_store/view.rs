//! From copies to jobs: the copies of one Disque job (one per node that
//! holds it) make a [`DisqueJob`]; the Disque jobs that carry one ezmq id
//! (usually one; two for a moment while a retry or a reschedule replaces
//! a job with a copy) make a [`Found`] job, with one state.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ezmq_core::spi::{envelope, JobInfo, JobState};
use ezmq_core::{Headers, Job, JobId, Topic, MESSAGE_ID_HEADER};

use super::copy::{Copy, DisqueState, Phase};

/// One Disque job: its copies.
#[derive(Clone, Debug)]
pub(super) struct DisqueJob {
    /// Disque's id.
    pub(super) id: JobId,
    pub(super) copies: Vec<Copy>,
}

impl DisqueJob {
    /// The copy whose queue time is read: the creating node's, else any.
    pub(super) fn judge(&self) -> Option<&Copy> {
        self.copies
            .iter()
            .find(|c| c.on_creator())
            .or_else(|| self.copies.first())
    }

    /// Where the job is: acked anywhere is finished, queued anywhere is
    /// ready; otherwise the creator's copy tells waiting from delivered
    /// (without it, every copy must look waiting: a copy made by
    /// replication cannot tell, so the job is taken as delivered).
    pub(super) fn phase(&self) -> Phase {
        let Some(judge) = self.judge() else {
            return Phase::Finished;
        };
        if self.copies.iter().any(|c| c.state == DisqueState::Acked) {
            return Phase::Finished;
        }
        if self.copies.iter().any(|c| c.state == DisqueState::Queued) {
            return Phase::Ready;
        }
        if self.copies.iter().any(|c| c.state == DisqueState::WaitRepl) {
            return Phase::Adding;
        }
        let phase = judge.phase();
        let same = |c: &Copy| std::mem::discriminant(&c.phase()) == std::mem::discriminant(&phase);
        if judge.on_creator() || self.copies.iter().all(same) {
            phase
        } else {
            Phase::Delivered
        }
    }

    /// The earliest instant a node may queue a copy that is not queued
    /// (its timer), over every copy.
    pub(super) fn next_queueing(&self) -> Option<tokio::time::Instant> {
        self.copies
            .iter()
            .filter(|c| c.state != DisqueState::Queued)
            .filter_map(Copy::queue_deadline)
            .min()
    }

    /// The ezmq job this Disque job carries: its id, headers, body, the
    /// attempt its next delivery gets.
    pub(super) fn job(&self, topic: &Topic) -> Option<(Job, Headers)> {
        let judge = self.judge()?;
        let (headers, body) = envelope::decode(judge.body.clone());
        let id = headers
            .get(MESSAGE_ID_HEADER)
            .map_or_else(|| self.id.clone(), JobId::new);
        let attempt = headers
            .attempt()
            .unwrap_or(1)
            .saturating_add(judge.nacks)
            .saturating_add(judge.deliveries);
        let job = Job::new(id, topic.clone(), body)
            .with_headers(headers.clone())
            .with_attempt(attempt);
        Some((job, headers))
    }

    fn newest(&self) -> u64 {
        self.judge().map_or(0, |c| c.ctime_ms)
    }
}

/// The Disque jobs of one ezmq job.
#[derive(Clone, Debug)]
pub(super) struct Found {
    pub(super) jobs: Vec<DisqueJob>,
}

impl Found {
    /// The Disque jobs not finished, with their phases.
    pub(super) fn live(&self) -> impl Iterator<Item = (&DisqueJob, Phase)> {
        self.jobs
            .iter()
            .map(|j| (j, j.phase()))
            .filter(|(_, p)| *p != Phase::Finished)
    }

    /// The job as it stands, `None` when it is finished or still being
    /// added: running when any of its Disque jobs is delivered, else ready
    /// when any is queued, else waiting (the newest copy's due time).
    pub(super) fn info(&self, topic: &Topic) -> Option<JobInfo> {
        let rank = |p: Phase| match p {
            Phase::Delivered => 3,
            Phase::Ready => 2,
            Phase::Waiting { .. } => 1,
            Phase::Adding | Phase::Finished => 0,
        };
        let (job, phase) = self
            .live()
            .filter(|(_, p)| rank(*p) > 0)
            .max_by_key(|(j, p)| (rank(*p), j.newest()))?;
        let (job, _) = job.job(topic)?;
        Some(match phase {
            Phase::Delivered => JobInfo::new(job, JobState::Running, None),
            Phase::Ready => JobInfo::new(job, JobState::Ready, None),
            Phase::Waiting { due_ms } => {
                let state = if job.attempt() > 1 {
                    JobState::Retrying
                } else {
                    JobState::Scheduled
                };
                let due = UNIX_EPOCH.checked_add(Duration::from_millis(due_ms));
                JobInfo::new(job, state, due.or(Some(SystemTime::UNIX_EPOCH)))
            }
            Phase::Adding | Phase::Finished => return None,
        })
    }
}

/// Groups scanned copies by Disque id, then by ezmq id (sorted by it).
pub(super) fn group(copies: &[Copy], topic: &Topic) -> BTreeMap<JobId, Found> {
    let mut by_disque: BTreeMap<JobId, DisqueJob> = BTreeMap::new();
    for copy in copies {
        by_disque
            .entry(copy.id.clone())
            .or_insert_with(|| DisqueJob {
                id: copy.id.clone(),
                copies: Vec::new(),
            })
            .copies
            .push(copy.clone());
    }
    let mut by_id: BTreeMap<JobId, Found> = BTreeMap::new();
    for job in by_disque.into_values() {
        let Some((ezmq, _)) = job.job(topic) else {
            continue;
        };
        by_id
            .entry(ezmq.id().clone())
            .or_insert_with(|| Found { jobs: Vec::new() })
            .jobs
            .push(job);
    }
    by_id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job_store::copy::tests::node;
    use crate::job_store::copy::Clock;
    use bytes::Bytes;
    use ezmq_core::{Headers, ATTEMPT_HEADER};

    fn copy(node_id: &str, disque: &str, state: DisqueState, body: Bytes, ctime_ms: u64) -> Copy {
        Copy {
            node: node(node_id),
            id: JobId::new(disque),
            state,
            repl: 2,
            ttl_s: 100,
            ctime_ms,
            delay_s: 60,
            retry_s: 30,
            nacks: 0,
            deliveries: 0,
            requeue_in_ms: Some(60_000),
            body,
            clock: Clock {
                server_ms: ctime_ms,
                sent: tokio::time::Instant::now(),
            },
        }
    }

    fn enveloped(id: &str, attempt: Option<u32>) -> Bytes {
        let mut headers = Headers::new();
        headers.insert(MESSAGE_ID_HEADER, id);
        if let Some(a) = attempt {
            headers.insert(ATTEMPT_HEADER, a.to_string());
        }
        envelope::encode(&headers, b"body")
    }

    #[test]
    fn copies_group_by_ezmq_id_and_merge_into_one_state() {
        let topic = Topic::new("q").unwrap();
        let d1 = "D-aaaaaaaa-xxxxxxxxxxxxxxxxxxxxxxxx-05a1";
        let d2 = "D-aaaaaaaa-yyyyyyyyyyyyyyyyyyyyyyyy-05a1";
        let d3 = "D-bbbbbbbb-zzzzzzzzzzzzzzzzzzzzzzzz-05a1";
        let copies = vec![
            // job-a: waiting on its creator, a replica elsewhere.
            copy(
                "aaaaaaaa11",
                d1,
                DisqueState::Active,
                enveloped("job-a", None),
                1_000,
            ),
            copy(
                "bbbbbbbb22",
                d1,
                DisqueState::Active,
                enveloped("job-a", None),
                1_000,
            ),
            // job-b: a retry copy waiting, the delivered original.
            copy(
                "aaaaaaaa11",
                d2,
                DisqueState::Active,
                enveloped("job-b", Some(2)),
                5_000,
            ),
            // A foreign job: its Disque id is its id.
            copy(
                "bbbbbbbb22",
                d3,
                DisqueState::Queued,
                Bytes::from_static(b"raw"),
                1_000,
            ),
        ];
        let jobs = group(&copies, &topic);
        assert_eq!(jobs.len(), 3);
        let a = jobs[&JobId::new("job-a")].info(&topic).unwrap();
        assert_eq!(a.state, JobState::Scheduled);
        assert!(a.due_at.is_some());
        let b = jobs[&JobId::new("job-b")].info(&topic).unwrap();
        assert_eq!((b.state, b.job.attempt()), (JobState::Retrying, 2));
        let raw = jobs[&JobId::new(d3)].info(&topic).unwrap();
        assert_eq!(
            (raw.state, &raw.job.body()[..]),
            (JobState::Ready, &b"raw"[..])
        );

        // An acked copy anywhere: finished, not listed.
        let mut done = copies[..2].to_vec();
        done[1].state = DisqueState::Acked;
        assert!(group(&done, &topic)[&JobId::new("job-a")]
            .info(&topic)
            .is_none());
        // Without the creator's copy, a replica whose queue time is its
        // replication's (delay + retry) cannot tell: running.
        let mut replica = copy(
            "bbbbbbbb22",
            d1,
            DisqueState::Active,
            enveloped("job-a", None),
            1_000,
        );
        replica.requeue_in_ms = Some(90_000);
        let replica = vec![replica];
        let found = &group(&replica, &topic)[&JobId::new("job-a")];
        assert_eq!(found.jobs[0].phase(), Phase::Delivered);
    }
}
