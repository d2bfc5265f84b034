//! [`Admin`]: the supported way for tools to look inside a broker and act
//! on it.

use std::time::{Duration, SystemTime};

use crate::error::Result;
use crate::flow_status::FlowStatus;
use crate::job::{Job, JobId};
use crate::listener::ListenerHandle;
use crate::listener::{self, topic_pause};
use crate::spi::{
    Cancelled, Capabilities, Capability, Delivery, DeliveryHandle, GroupInfo, JobInfo, JobState,
    JobStore, Runtime, Source,
};
use crate::topic::Topic;
use crate::unique;

/// Inspection and maintenance, the same on every backend: what the ezmq
/// command line (and a dashboard, an ops script) builds on. Get one from
/// [`MqClient::admin`](crate::MqClient::admin). Each call fails with
/// [`Error::Unsupported`](crate::Error::Unsupported) on a backend without
/// the capability it needs.
///
/// Topics are [`Topic`]s, so tools can name ezmq's internal ones too
/// (the queue of a broadcast group, say).
///
/// ```no_run
/// # async fn demo(client: &dyn ezmq_core::MqClient) -> ezmq_core::Result<()> {
/// use ezmq_core::Topic;
///
/// let admin = client.admin();
/// let orders = Topic::new("orders")?;
/// println!(
///     "{}: {} waiting, {:?} in flight, {} listeners here",
///     admin.backend_name(),
///     admin.queue_len(&orders).await?,
///     admin.in_flight(&orders).await?,
///     admin.listeners().len(),
/// );
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Admin<'a> {
    runtime: &'a Runtime,
}

impl<'a> Admin<'a> {
    pub(crate) fn new(runtime: &'a Runtime) -> Self {
        Admin { runtime }
    }

    /// The broker's name: `disque`, `redis`, `rabbitmq`.
    pub fn backend_name(&self) -> &'static str {
        self.runtime.backend().name()
    }

    /// What the broker can do beyond push and consume.
    pub fn capabilities(&self) -> Capabilities {
        self.runtime.backend().capabilities()
    }

    /// Jobs waiting in `topic` ([`Capability::QueueStats`]).
    pub async fn queue_len(&self, topic: &Topic) -> Result<u64> {
        self.runtime.ensure_open()?;
        match self.runtime.backend().queue_stats() {
            Some(stats) => stats.queue_len(topic).await,
            None => Err(self.runtime.unsupported(Capability::QueueStats)),
        }
    }

    /// Jobs of `topic` delivered and not yet settled, when the broker can
    /// count them ([`Capability::QueueStats`]).
    pub async fn in_flight(&self, topic: &Topic) -> Result<Option<u64>> {
        self.runtime.ensure_open()?;
        match self.runtime.backend().queue_stats() {
            Some(stats) => stats.in_flight(topic).await,
            None => Err(self.runtime.unsupported(Capability::QueueStats)),
        }
    }

    /// Up to `n` waiting jobs of `topic`, oldest first, left in place
    /// ([`Capability::Peek`]).
    pub async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>> {
        self.runtime.ensure_open()?;
        match self.runtime.backend().peek() {
            Some(peek) => peek.peek(topic, n).await,
            None => Err(self.runtime.unsupported(Capability::Peek)),
        }
    }

    /// The broadcast groups of `topic` ([`Capability::FanOut`]); `None`
    /// when the broker cannot list them.
    pub async fn groups(&self, topic: &Topic) -> Result<Option<Vec<GroupInfo>>> {
        self.runtime.ensure_open()?;
        self.runtime.fan_out()?.groups(topic).await
    }

    /// Job `id` of `topic`, wherever it is ([`Capability::JobStore`]);
    /// `None` when it is not found.
    pub async fn job(&self, topic: &Topic, id: &JobId) -> Result<Option<JobInfo>> {
        self.job_store()?.job(topic, id).await
    }

    /// Up to `limit` jobs of `topic` in `state`, by id, after `after`
    /// ([`Capability::JobStore`]).
    pub async fn jobs(
        &self,
        topic: &Topic,
        state: JobState,
        after: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<JobInfo>> {
        self.job_store()?.jobs(topic, state, after, limit).await
    }

    /// How many jobs of `topic` are in `state` ([`Capability::JobStore`]).
    pub async fn count_jobs(&self, topic: &Topic, state: JobState) -> Result<u64> {
        self.job_store()?.count(topic, state).await
    }

    /// Removes job `id` of `topic` unless it is running
    /// ([`Capability::JobStore`]). A removed unique job gives its key back.
    pub async fn cancel_job(&self, topic: &Topic, id: &JobId) -> Result<Cancelled> {
        let store = self.job_store()?;
        let backend = &**self.runtime.backend();
        let unique = match backend.exclusive_claim() {
            Some(_) => store
                .job(topic, id)
                .await?
                .and_then(|info| unique::settled_key(&info.job)),
            None => None,
        };
        let cancelled = store.cancel(topic, id).await?;
        if let (Cancelled::Removed, Some(key)) = (cancelled, unique) {
            unique::release(backend, &key, id).await;
        }
        Ok(cancelled)
    }

    /// Makes a scheduled or retrying job ready now
    /// ([`Capability::JobStore`]); false when it is neither.
    pub async fn promote_job(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        self.job_store()?.promote(topic, id).await
    }

    /// The jobs of `topic` waiting for a time — scheduled (a delayed push)
    /// or retrying (a failed job waiting for its backoff) — soonest due
    /// first, at most `n` ([`Capability::JobStore`]). Each has its id, due
    /// time, next attempt, headers and body.
    pub async fn scheduled(&self, topic: &Topic, n: usize) -> Result<Vec<JobInfo>> {
        let store = self.job_store()?;
        let (mut found, retrying) = tokio::try_join!(
            store.jobs(topic, JobState::Scheduled, None, usize::MAX),
            store.jobs(topic, JobState::Retrying, None, usize::MAX),
        )?;
        found.extend(retrying);
        found.sort_by_key(|info| info.due_at.unwrap_or(SystemTime::UNIX_EPOCH));
        found.truncate(n);
        Ok(found)
    }

    /// How many jobs of `topic` are scheduled or retrying
    /// ([`Capability::JobStore`]): what `queue_len` (ready jobs) leaves out.
    pub async fn scheduled_len(&self, topic: &Topic) -> Result<u64> {
        let store = self.job_store()?;
        let (scheduled, retrying) = tokio::try_join!(
            store.count(topic, JobState::Scheduled),
            store.count(topic, JobState::Retrying),
        )?;
        Ok(scheduled + retrying)
    }

    /// Moves a scheduled or retrying job's due time to `at`
    /// ([`Capability::JobStore`]); false when it is neither. It is not
    /// delivered before `at`.
    pub async fn reschedule_job(&self, topic: &Topic, id: &JobId, at: SystemTime) -> Result<bool> {
        self.job_store()?.reschedule(topic, id, at).await
    }

    /// Pauses `topic` in every process ([`Capability::ExclusiveClaim`]):
    /// within a second every listener of it stops taking jobs (running
    /// handlers finish and are settled as usual; jobs a backend holds
    /// prefetched go back to the broker), and a listener started while it
    /// is paused stays idle. Pushes are still accepted. The pause lasts
    /// until [`Admin::resume`], at most 30 days. True when the topic was
    /// not paused yet.
    ///
    /// ```no_run
    /// # async fn demo(client: &dyn ezmq_core::MqClient) -> ezmq_core::Result<()> {
    /// use ezmq_core::Topic;
    ///
    /// let mail = Topic::new("mail")?;
    /// client.admin().pause(&mail).await?;
    /// assert!(client.admin().is_paused(&mail).await?);
    /// // ...maintenance...
    /// client.admin().resume(&mail).await?;
    /// # Ok(()) }
    /// ```
    pub async fn pause(&self, topic: &Topic) -> Result<bool> {
        topic_pause::pause(self.runtime.exclusive_claim()?, topic).await
    }

    /// Resumes a paused `topic` in every process
    /// ([`Capability::ExclusiveClaim`]): its listeners fetch again within
    /// a second. True when it was paused.
    pub async fn resume(&self, topic: &Topic) -> Result<bool> {
        topic_pause::resume(self.runtime.exclusive_claim()?, topic).await
    }

    /// True while `topic` is paused ([`Admin::pause`]).
    pub async fn is_paused(&self, topic: &Topic) -> Result<bool> {
        topic_pause::is_paused(self.runtime.exclusive_claim()?, topic).await
    }

    /// `topic`'s flow control as its listeners publish it
    /// ([`Capability::ExclusiveClaim`]): the limits they run with
    /// ([`ConsumeOptions::with_rate_limit`](crate::ConsumeOptions::with_rate_limit),
    /// [`with_global_concurrency`](crate::ConsumeOptions::with_global_concurrency))
    /// and whether one of them waited for those limits in the last 5 s.
    ///
    /// ```no_run
    /// # async fn demo(client: ezmq_core::Client) -> ezmq_core::Result<()> {
    /// use ezmq_core::{MqClient, Topic};
    ///
    /// let status = client.admin().flow(&Topic::new("emails")?).await?;
    /// if let Some(limits) = status.limits {
    ///     println!("emails: {limits}, held back: {}", status.held_back);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn flow(&self, topic: &Topic) -> Result<FlowStatus> {
        listener::flow_status(self.runtime.exclusive_claim()?, topic).await
    }

    fn job_store(&self) -> Result<&'a dyn JobStore> {
        self.runtime.ensure_open()?;
        self.runtime
            .backend()
            .job_store()
            .ok_or_else(|| self.runtime.unsupported(Capability::JobStore))
    }

    /// This client's listeners that have not drained yet.
    pub fn listeners(&self) -> Vec<ListenerHandle> {
        self.runtime.listeners()
    }

    /// Takes up to `max` jobs off `topic` without a listener, waiting up
    /// to `wait` for the first: for tools that move or delete jobs (a
    /// dead-letter requeue). Each delivery belongs to the caller until its
    /// handle settles it (or its lease ends and the broker redelivers it).
    pub async fn take(&self, topic: &Topic, max: usize, wait: Duration) -> Result<Vec<Delivery>> {
        self.runtime.ensure_open()?;
        self.runtime
            .backend()
            .receive(&Source::Topic(topic.clone()), max, wait)
            .await
    }

    /// Acknowledges (deletes) taken jobs at once.
    pub async fn ack_all(&self, handles: &[DeliveryHandle]) -> Result<()> {
        self.runtime.backend().ack_batch(handles).await
    }
}
