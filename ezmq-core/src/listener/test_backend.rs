//! An in-memory [`Backend`] for the listener's unit tests.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::push_options::PushOptions;
use crate::topic::Topic;

/// What the backend holds and what it saw.
#[derive(Debug)]
pub(crate) struct State {
    queues: HashMap<String, VecDeque<Job>>,
    active: HashMap<JobId, Job>,
    next_id: u64,
    /// Jobs ACKed, in order.
    pub(crate) acked: Vec<JobId>,
    /// Jobs NACKed, in order.
    pub(crate) nacked: Vec<JobId>,
    /// Jobs requeued without counting an attempt.
    pub(crate) requeued: Vec<JobId>,
    /// Size of each `ack_many` call, in order.
    pub(crate) ack_batches: Vec<usize>,
    /// The next this many `ack_many` calls fail (acknowledging nothing).
    pub(crate) failing_ack_batches: u32,
    /// Heartbeats, in order.
    pub(crate) working: Vec<JobId>,
    /// For each fetch: (jobs active at the broker, `max` asked).
    pub(crate) fetches: Vec<(usize, usize)>,
    /// The next this many fetches fail.
    pub(crate) failing_fetches: u32,
    /// What `working` answers.
    pub(crate) retry_window: Duration,
    /// `close` was called.
    pub(crate) closed: bool,
}

#[derive(Debug)]
pub(crate) struct MemBackend {
    state: Mutex<State>,
    changed: Notify,
}

impl MemBackend {
    pub(crate) fn new() -> Self {
        MemBackend {
            state: Mutex::new(State {
                queues: HashMap::new(),
                active: HashMap::new(),
                next_id: 0,
                acked: Vec::new(),
                nacked: Vec::new(),
                requeued: Vec::new(),
                ack_batches: Vec::new(),
                failing_ack_batches: 0,
                working: Vec::new(),
                fetches: Vec::new(),
                failing_fetches: 0,
                retry_window: Duration::from_secs(4),
                closed: false,
            }),
            changed: Notify::new(),
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// Queues a job directly.
    pub(crate) fn put(&self, topic: &str, body: impl Into<Bytes>) -> JobId {
        let mut st = self.state();
        st.next_id += 1;
        let id = JobId::new(format!("J-{}", st.next_id));
        let job = Job::new(id.clone(), Topic::from_broker(topic.into()), body.into());
        st.queues.entry(topic.into()).or_default().push_back(job);
        drop(st);
        self.changed.notify_waiters();
        id
    }

    /// Jobs waiting in `topic`.
    pub(crate) fn waiting(&self, topic: &str) -> Vec<Job> {
        self.state()
            .queues
            .get(topic)
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn give_back(&self, id: &JobId, count: bool) -> Result<()> {
        let mut st = self.state();
        let job = st
            .active
            .remove(id)
            .ok_or_else(|| Error::backend(format!("unknown job {id}"), false))?;
        let job = if count {
            st.nacked.push(id.clone());
            let (n, d) = (job.nacks(), job.additional_deliveries());
            job.with_counters(n + 1, d)
        } else {
            st.requeued.push(id.clone());
            job
        };
        st.queues
            .entry(job.topic().as_str().into())
            .or_default()
            .push_back(job);
        drop(st);
        self.changed.notify_waiters();
        Ok(())
    }
}

#[async_trait]
impl Backend for MemBackend {
    async fn add(&self, topic: &Topic, body: Bytes, _options: &PushOptions) -> Result<JobId> {
        Ok(self.put(topic.as_str(), body))
    }

    async fn fetch(&self, topic: &Topic, max: usize, wait: Duration) -> Result<Vec<Job>> {
        {
            let mut st = self.state();
            let active = st.active.len();
            st.fetches.push((active, max));
            if st.failing_fetches > 0 {
                st.failing_fetches -= 1;
                return Err(Error::backend("broker down", true));
            }
        }
        let deadline = Instant::now() + wait;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.state();
                let queue = st.queues.entry(topic.as_str().into()).or_default();
                let n = queue.len().min(max);
                let jobs: Vec<Job> = queue.drain(..n).collect();
                if !jobs.is_empty() {
                    for job in &jobs {
                        st.active.insert(job.id().clone(), job.clone());
                    }
                    return Ok(jobs);
                }
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(deadline) => return Ok(Vec::new()),
            }
        }
    }

    async fn ack(&self, id: &JobId) -> Result<()> {
        let mut st = self.state();
        st.active.remove(id);
        st.acked.push(id.clone());
        Ok(())
    }

    async fn ack_many(&self, ids: &[JobId]) -> Result<()> {
        let mut st = self.state();
        st.ack_batches.push(ids.len());
        if st.failing_ack_batches > 0 {
            st.failing_ack_batches -= 1;
            return Err(Error::backend("broker down", true));
        }
        for id in ids {
            st.active.remove(id);
            st.acked.push(id.clone());
        }
        Ok(())
    }

    async fn nack(&self, id: &JobId) -> Result<()> {
        self.give_back(id, true)
    }

    async fn requeue(&self, id: &JobId) -> Result<()> {
        self.give_back(id, false)
    }

    async fn working(&self, id: &JobId) -> Result<Duration> {
        let mut st = self.state();
        st.working.push(id.clone());
        Ok(st.retry_window)
    }

    async fn queue_len(&self, topic: &Topic) -> Result<u64> {
        Ok(self.waiting(topic.as_str()).len() as u64)
    }

    async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>> {
        Ok(self.waiting(topic.as_str()).into_iter().take(n).collect())
    }

    async fn close(&self) -> Result<()> {
        self.state().closed = true;
        Ok(())
    }
}
