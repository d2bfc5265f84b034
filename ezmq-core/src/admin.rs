//! [`Admin`]: the supported way for tools to look inside a broker and act
//! on it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

use crate::error::Result;
use crate::flow_status::FlowStatus;
use crate::health::BrokerHealth;
use crate::job::{Job, JobId};
use crate::lane_mark;
use crate::listener::ListenerHandle;
use crate::listener::{self, topic_pause};
use crate::presence::{self, Participant};
use crate::priority;
use crate::spi::{
    Cancelled, Capabilities, Capability, Delivery, DeliveryHandle, GroupInfo, JobInfo, JobState,
    JobStore, Runtime, Source,
};
use crate::topic::{Topic, INTERNAL_PREFIX};
use crate::unique;

/// Jobs read from a lane of `topic`, as jobs of `topic`.
fn in_topic(topic: &Topic, mut jobs: Vec<Job>) -> Vec<Job> {
    for job in &mut jobs {
        job.set_topic(topic.clone());
    }
    jobs
}

/// A job found in a lane of `topic`, as a job of `topic`.
fn info_in(topic: &Topic, mut info: JobInfo) -> JobInfo {
    info.job.set_topic(topic.clone());
    info
}

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

    pub(crate) fn runtime(&self) -> &'a Runtime {
        self.runtime
    }

    /// The broker's name: `disque`, `redis`, `rabbitmq`.
    pub fn backend_name(&self) -> &'static str {
        self.runtime.backend().name()
    }

    /// What the broker can do beyond push and consume.
    pub fn capabilities(&self) -> Capabilities {
        self.runtime.backend().capabilities()
    }

    /// The broker's health: its server, facts such as its version, mode
    /// and uptime, and each of its nodes, up or down (what each backend
    /// reports: [`BrokerHealth`]). The last fact, `answered in`, is how
    /// long the call took. A node that does not answer is reported down,
    /// not as an error; the report never holds an address, a URL or a
    /// credential, so it can be shown as it is.
    ///
    /// ```no_run
    /// # async fn demo(client: &dyn ezmq_core::MqClient) -> ezmq_core::Result<()> {
    /// let health = client.admin().health().await?;
    /// println!("{}", health.server);
    /// for (label, value) in &health.facts {
    ///     println!("  {label}: {value}");
    /// }
    /// for node in &health.nodes {
    ///     println!("  {} {}", node.name, if node.up { "up" } else { "DOWN" });
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn health(&self) -> Result<BrokerHealth> {
        self.runtime.ensure_open()?;
        let started = Instant::now();
        let health = self.runtime.backend().health().await?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(health.with_fact("answered in", format!("{ms:.1} ms")))
    }

    /// Jobs waiting in `topic`, its priority lanes included
    /// ([`Capability::QueueStats`]).
    pub async fn queue_len(&self, topic: &Topic) -> Result<u64> {
        self.runtime.ensure_open()?;
        let Some(stats) = self.runtime.backend().queue_stats() else {
            return Err(self.runtime.unsupported(Capability::QueueStats));
        };
        let lanes = self.lanes(topic).await?;
        let lens = futures::future::try_join_all(lanes.iter().map(|q| stats.queue_len(q))).await?;
        Ok(lens.into_iter().sum())
    }

    /// Jobs of `topic` delivered and not yet settled, when the broker can
    /// count them ([`Capability::QueueStats`]).
    pub async fn in_flight(&self, topic: &Topic) -> Result<Option<u64>> {
        self.runtime.ensure_open()?;
        let Some(stats) = self.runtime.backend().queue_stats() else {
            return Err(self.runtime.unsupported(Capability::QueueStats));
        };
        let lanes = self.lanes(topic).await?;
        let counts =
            futures::future::try_join_all(lanes.iter().map(|q| stats.in_flight(q))).await?;
        Ok(counts.into_iter().try_fold(0, |sum, n| n.map(|n| sum + n)))
    }

    /// Up to `n` waiting jobs of `topic`, left in place
    /// ([`Capability::Peek`]): its High lane's first, then its own, then
    /// its Low lane's, each oldest first.
    pub async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>> {
        self.runtime.ensure_open()?;
        let Some(peek) = self.runtime.backend().peek() else {
            return Err(self.runtime.unsupported(Capability::Peek));
        };
        let mut out = Vec::new();
        for lane in self.lanes(topic).await? {
            if out.len() >= n {
                break;
            }
            out.extend(in_topic(topic, peek.peek(&lane, n - out.len()).await?));
        }
        Ok(out)
    }

    /// The broadcast groups of `topic` ([`Capability::FanOut`]); `None`
    /// when the broker cannot list them. Where the broker keeps presence
    /// ([`Admin::has_presence`]), [`GroupInfo::members`] counts the members
    /// running now ([`Admin::participants`]), and groups with a live
    /// member are listed even when the broker does not know them yet.
    pub async fn groups(&self, topic: &Topic) -> Result<Option<Vec<GroupInfo>>> {
        self.runtime.ensure_open()?;
        let listed = self.runtime.fan_out()?.groups(topic).await?;
        if !self.has_presence() {
            return Ok(listed);
        }
        let mut live: BTreeMap<String, u64> = BTreeMap::new();
        for participant in self.participants().await? {
            for listener in participant.listeners {
                if listener.topic == topic.as_str() {
                    if let Some(group) = listener.group {
                        *live.entry(group).or_default() += 1;
                    }
                }
            }
        }
        let mut groups = listed.unwrap_or_default();
        for group in &mut groups {
            group.members = Some(live.remove(&group.name).unwrap_or(0));
        }
        groups.extend(
            live.into_iter()
                .map(|(name, members)| GroupInfo::new(name).with_members(members)),
        );
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Some(groups))
    }

    /// True when the broker keeps presence ([`Admin::participants`]): it
    /// can peek, or keeps the records in a store of its own (RabbitMQ).
    pub fn has_presence(&self) -> bool {
        presence::available(self.runtime.backend().as_ref())
    }

    /// The clients running listeners or registered entries (crontabs) on
    /// the broker right now, each with what it runs, sorted by id
    /// (where [`Admin::has_presence`]; see [`presence`]). A client
    /// that shut down is gone at once; one whose process died, within
    /// [`PRESENCE_EXPIRY`](crate::presence::PRESENCE_EXPIRY).
    ///
    /// ```no_run
    /// # async fn demo(client: &dyn ezmq_core::MqClient) -> ezmq_core::Result<()> {
    /// for p in client.admin().participants().await? {
    ///     for l in &p.listeners {
    ///         println!("{} consumes {} ({} running)", p.process, l.topic, l.in_flight);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn participants(&self) -> Result<Vec<Participant>> {
        self.runtime.ensure_open()?;
        presence::live(self.runtime.backend().as_ref()).await
    }

    /// The user topics on the broker, sorted: those the broker lists
    /// ([`QueueStats::topics`](crate::spi::QueueStats::topics)) and those
    /// live listeners consume ([`Admin::participants`]). Fails with
    /// [`Error::Unsupported`](crate::Error::Unsupported) when the broker
    /// can do neither.
    pub async fn topics(&self) -> Result<Vec<Topic>> {
        self.runtime.ensure_open()?;
        let live = if self.has_presence() {
            Some(self.participants().await?)
        } else {
            None
        };
        self.topics_of(live.as_deref()).await
    }

    /// [`Admin::topics`] with the live participants already read (a page
    /// that shows both reads presence once). `participants` should come
    /// from [`Admin::participants`]; without presence pass `&[]`.
    pub async fn topics_with(&self, participants: &[Participant]) -> Result<Vec<Topic>> {
        self.runtime.ensure_open()?;
        let live = self.has_presence().then_some(participants);
        self.topics_of(live).await
    }

    async fn topics_of(&self, live: Option<&[Participant]>) -> Result<Vec<Topic>> {
        let listed = match self.runtime.backend().queue_stats() {
            Some(stats) => stats.topics().await?,
            None => None,
        };
        if listed.is_none() && live.is_none() {
            return Err(self.runtime.unsupported(Capability::Peek));
        }
        let mut names: BTreeSet<String> = listed
            .unwrap_or_default()
            .iter()
            .map(|t| t.as_str().to_owned())
            .collect();
        for participant in live.unwrap_or_default() {
            names.extend(participant.listeners.iter().map(|l| l.topic.clone()));
        }
        Ok(names
            .into_iter()
            .filter_map(|name| Topic::new(&name).ok())
            .collect())
    }

    /// Job `id` of `topic`, wherever it is ([`Capability::JobStore`]);
    /// `None` when it is not found.
    pub async fn job(&self, topic: &Topic, id: &JobId) -> Result<Option<JobInfo>> {
        Ok(self.find(topic, id).await?.map(|(_, info)| info))
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
        let store = self.job_store()?;
        let lanes = self.lanes(topic).await?;
        let found = futures::future::try_join_all(
            lanes
                .iter()
                .map(|lane| store.jobs(lane, state, after, limit)),
        )
        .await?;
        let mut jobs: Vec<JobInfo> = found
            .into_iter()
            .flatten()
            .map(|info| info_in(topic, info))
            .collect();
        if lanes.len() > 1 {
            jobs.sort_by(|a, b| a.job.id().as_str().cmp(b.job.id().as_str()));
            jobs.truncate(limit);
        }
        Ok(jobs)
    }

    /// How many jobs of `topic` are in `state` ([`Capability::JobStore`]).
    pub async fn count_jobs(&self, topic: &Topic, state: JobState) -> Result<u64> {
        let store = self.job_store()?;
        let lanes = self.lanes(topic).await?;
        let counts =
            futures::future::try_join_all(lanes.iter().map(|lane| store.count(lane, state)))
                .await?;
        Ok(counts.into_iter().sum())
    }

    /// Removes job `id` of `topic` unless it is running
    /// ([`Capability::JobStore`]). A removed unique job gives its key back.
    pub async fn cancel_job(&self, topic: &Topic, id: &JobId) -> Result<Cancelled> {
        let store = self.job_store()?;
        let backend = &**self.runtime.backend();
        let Some((lane, info)) = self.find(topic, id).await? else {
            return Ok(Cancelled::NotFound);
        };
        let unique = match backend.exclusive_claim() {
            Some(_) => unique::settled_key(&info.job),
            None => None,
        };
        let cancelled = store.cancel(&lane, id).await?;
        if let (Cancelled::Removed, Some(key)) = (cancelled, unique) {
            unique::release(backend, &key, id).await;
        }
        Ok(cancelled)
    }

    /// Makes a scheduled or retrying job ready now
    /// ([`Capability::JobStore`]); false when it is neither.
    pub async fn promote_job(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        match self.find(topic, id).await? {
            Some((lane, _)) => self.job_store()?.promote(&lane, id).await,
            None => Ok(false),
        }
    }

    /// The jobs of `topic` waiting for a time — scheduled (a delayed push)
    /// or retrying (a failed job waiting for its backoff) — soonest due
    /// first, at most `n` ([`Capability::JobStore`]). Each has its id, due
    /// time, next attempt, headers and body.
    pub async fn scheduled(&self, topic: &Topic, n: usize) -> Result<Vec<JobInfo>> {
        let (mut found, retrying) = tokio::try_join!(
            self.jobs(topic, JobState::Scheduled, None, usize::MAX),
            self.jobs(topic, JobState::Retrying, None, usize::MAX),
        )?;
        found.extend(retrying);
        found.sort_by_key(|info| info.due_at.unwrap_or(SystemTime::UNIX_EPOCH));
        found.truncate(n);
        Ok(found)
    }

    /// How many jobs of `topic` are scheduled or retrying
    /// ([`Capability::JobStore`]): what `queue_len` (ready jobs) leaves out.
    pub async fn scheduled_len(&self, topic: &Topic) -> Result<u64> {
        let (scheduled, retrying) = tokio::try_join!(
            self.count_jobs(topic, JobState::Scheduled),
            self.count_jobs(topic, JobState::Retrying),
        )?;
        Ok(scheduled + retrying)
    }

    /// Moves a scheduled or retrying job's due time to `at`
    /// ([`Capability::JobStore`]); false when it is neither. It is not
    /// delivered before `at`.
    pub async fn reschedule_job(&self, topic: &Topic, id: &JobId, at: SystemTime) -> Result<bool> {
        match self.find(topic, id).await? {
            Some((lane, _)) => self.job_store()?.reschedule(&lane, id, at).await,
            None => Ok(false),
        }
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

    /// The queues of `topic`: its priority lanes and itself, highest
    /// first, while it is marked as having lanes; itself alone otherwise.
    async fn lanes(&self, topic: &Topic) -> Result<Vec<Topic>> {
        let claims = match self.runtime.backend().exclusive_claim() {
            Some(claims) if !topic.as_str().starts_with(INTERNAL_PREFIX) => claims,
            _ => return Ok(vec![topic.clone()]),
        };
        if lane_mark::is_marked(claims, topic).await? {
            Ok(priority::lanes(topic)?.to_vec())
        } else {
            Ok(vec![topic.clone()])
        }
    }

    /// Job `id` of `topic` and the lane it is in. The topic's own queue
    /// (the Normal lane) first: a job found there costs no look at the
    /// lanes' mark, so plain topics pay one lookup, as before lanes.
    async fn find(&self, topic: &Topic, id: &JobId) -> Result<Option<(Topic, JobInfo)>> {
        let store = self.job_store()?;
        if let Some(info) = store.job(topic, id).await? {
            return Ok(Some((topic.clone(), info)));
        }
        for lane in self.lanes(topic).await? {
            if &lane == topic {
                continue;
            }
            if let Some(info) = store.job(&lane, id).await? {
                return Ok(Some((lane, info_in(topic, info))));
            }
        }
        Ok(None)
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
