//! Group membership: announcements written by live members into a per-topic
//! registry queue, and the producers' cached reading of it.
//!
//! Nobody consumes a registry queue. Every announcement is a replicated job
//! whose body is the group name and whose TTL is the retention; producers
//! read the queue with a non-consuming, cluster-wide `peek`. A member
//! replaces its previous announcement after each refresh (push the new one,
//! then acknowledge the old one), so a registry holds about one job per live
//! member plus one per member that died less than a retention ago.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use bytes::Bytes;
use ezmq_core::{Backend, JobId, ListenerHandle, PushOptions, Result, Topic};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::config::BroadcastConfig;
use crate::names;

/// Shortest wait before retrying an announcement that failed.
const ANNOUNCE_RETRY: Duration = Duration::from_secs(1);

/// Per-client broadcasting state, kept as a client extension.
#[derive(Debug, Default)]
pub(crate) struct BroadcastState {
    config: RwLock<BroadcastConfig>,
    /// Group lists by registry queue; the async mutex makes concurrent
    /// producers of one topic share a single read of the registry.
    cache: Mutex<HashMap<Topic, Arc<tokio::sync::Mutex<Option<Cached>>>>>,
}

/// A group list read from a registry.
#[derive(Debug)]
struct Cached {
    groups: Arc<[String]>,
    /// When the read that produced `groups` started.
    read_at: Instant,
}

impl BroadcastState {
    pub(crate) fn config(&self) -> BroadcastConfig {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_config(&self, config: BroadcastConfig) {
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = config;
    }

    fn lock_cache(
        &self,
    ) -> MutexGuard<'_, HashMap<Topic, Arc<tokio::sync::Mutex<Option<Cached>>>>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn slot(&self, registry: &Topic) -> Arc<tokio::sync::Mutex<Option<Cached>>> {
        Arc::clone(self.lock_cache().entry(registry.clone()).or_default())
    }

    /// Forgets the cached group list of `registry`, so the next broadcast
    /// reads it again (a member of this client just joined).
    pub(crate) async fn invalidate(&self, registry: &Topic) {
        let slot = self.slot(registry);
        *slot.lock().await = None;
    }

    /// The groups of `registry`, read at most `config.discovery_interval`
    /// ago (`fresh` forces a read). When a read fails and an older list is
    /// known, the older list is used (its queues still exist) and a warning
    /// logged.
    pub(crate) async fn groups<B: Backend>(
        &self,
        backend: &B,
        registry: &Topic,
        fresh: bool,
    ) -> Result<Arc<[String]>> {
        let config = self.config();
        let slot = self.slot(registry);
        let mut cached = slot.lock().await;
        if let Some(c) = cached.as_ref() {
            if !fresh && c.read_at.elapsed() < config.discovery_interval {
                return Ok(Arc::clone(&c.groups));
            }
        }
        let read_at = Instant::now();
        match read_groups(backend, registry, config.discovery_limit).await {
            Ok(groups) => {
                *cached = Some(Cached {
                    groups: Arc::clone(&groups),
                    read_at,
                });
                Ok(groups)
            }
            Err(err) => match cached.as_ref() {
                Some(c) if !fresh => {
                    warn!(
                        registry = %registry,
                        cause = %err,
                        age = ?c.read_at.elapsed(),
                        "group discovery failed; using the last known groups"
                    );
                    Ok(Arc::clone(&c.groups))
                }
                _ => Err(err),
            },
        }
    }
}

/// Reads the distinct, valid group names announced in `registry`.
async fn read_groups<B: Backend>(
    backend: &B,
    registry: &Topic,
    limit: usize,
) -> Result<Arc<[String]>> {
    let jobs = backend.peek(registry, limit).await?;
    if jobs.len() >= limit {
        warn!(
            registry = %registry,
            limit,
            "registry holds at least discovery_limit announcements; groups may be missed \
             (raise BroadcastConfig::discovery_limit)"
        );
    }
    let mut groups = BTreeSet::new();
    for job in &jobs {
        match std::str::from_utf8(job.body()) {
            Ok(group) if names::check_group(group).is_ok() => {
                if !groups.contains(group) {
                    groups.insert(group.to_owned());
                }
            }
            _ => {
                debug!(registry = %registry, job_id = %job.id(), "ignoring a malformed announcement")
            }
        }
    }
    debug!(registry = %registry, announcements = jobs.len(), groups = groups.len(), "groups discovered");
    Ok(groups.into_iter().collect())
}

/// Keeps one member's announcement alive.
#[derive(Debug)]
pub(crate) struct Announcer<B: Backend> {
    backend: Arc<B>,
    state: Arc<BroadcastState>,
    registry: Topic,
    group: String,
    /// The member's current announcement, replaced at each refresh.
    last: Option<JobId>,
}

impl<B: Backend> Announcer<B> {
    pub(crate) fn new(
        backend: Arc<B>,
        state: Arc<BroadcastState>,
        registry: Topic,
        group: String,
    ) -> Self {
        Announcer {
            backend,
            state,
            registry,
            group,
            last: None,
        }
    }

    /// Stores a fresh announcement, then drops the previous one.
    pub(crate) async fn announce(&mut self) -> Result<()> {
        let config = self.state.config();
        // Replicated like any job. Nobody fetches announcements, so the
        // retry time only matters when the node holding the queued copy is
        // lost: a replica queues its copy after it. Using the announce
        // interval makes that take no longer than the next refresh.
        let retry = config
            .effective_announce_interval()
            .max(Duration::from_secs(1));
        let options = PushOptions::new()
            .with_ttl(config.retention)
            .with_retry(retry);
        let id = self
            .backend
            .add(&self.registry, Bytes::from(self.group.clone()), &options)
            .await?;
        debug!(registry = %self.registry, group = %self.group, job_id = %id, "announced");
        if let Some(previous) = self.last.replace(id) {
            // Only keeps the registry small: if it fails, the old
            // announcement simply expires with its TTL.
            if let Err(err) = self.backend.ack(&previous).await {
                debug!(job_id = %previous, cause = %err, "could not drop a previous announcement");
            }
        }
        Ok(())
    }

    /// Refreshes the announcement every announce interval until `stop` is
    /// cancelled or the listener stops. The last announcement is left in
    /// place: the group stays in fan-out for one retention after it.
    pub(crate) async fn run(mut self, listener: ListenerHandle, stop: CancellationToken) {
        let mut failed = false;
        loop {
            let interval = self.state.config().effective_announce_interval();
            let wait = if failed {
                interval.min(ANNOUNCE_RETRY)
            } else {
                interval
            };
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(wait) => {}
            }
            if !listener.is_running() || stop.is_cancelled() {
                break;
            }
            // Not cancellable: once `stop` returns, no announcement is in
            // flight.
            failed = match self.announce().await {
                Ok(()) => false,
                Err(err) => {
                    warn!(
                        registry = %self.registry,
                        group = %self.group,
                        cause = %err,
                        "membership announcement failed; retrying"
                    );
                    true
                }
            };
        }
        debug!(registry = %self.registry, group = %self.group, "announcer stopped");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use async_trait::async_trait;
    use ezmq_core::{Error, Job};

    use super::*;

    /// Just enough of a broker: queues of jobs, `peek`, `ack`.
    #[derive(Debug, Default)]
    struct MemBackend {
        queues: Mutex<HashMap<Topic, Vec<Job>>>,
        next_id: AtomicUsize,
        peeks: AtomicUsize,
        fail_peek: AtomicBool,
    }

    impl MemBackend {
        fn put(&self, topic: &Topic, body: &'static [u8]) {
            let id = JobId::new(format!("J{}", self.next_id.fetch_add(1, Ordering::SeqCst)));
            let job = Job::new(id, topic.clone(), Bytes::from_static(body));
            self.queues
                .lock()
                .unwrap()
                .entry(topic.clone())
                .or_default()
                .push(job);
        }

        fn len(&self, topic: &Topic) -> usize {
            self.queues.lock().unwrap().get(topic).map_or(0, Vec::len)
        }
    }

    #[async_trait]
    impl Backend for MemBackend {
        async fn add(&self, topic: &Topic, body: Bytes, _: &PushOptions) -> Result<JobId> {
            let id = JobId::new(format!("J{}", self.next_id.fetch_add(1, Ordering::SeqCst)));
            let job = Job::new(id.clone(), topic.clone(), body);
            self.queues
                .lock()
                .unwrap()
                .entry(topic.clone())
                .or_default()
                .push(job);
            Ok(id)
        }
        async fn fetch(&self, _: &Topic, _: usize, _: Duration) -> Result<Vec<Job>> {
            Ok(Vec::new())
        }
        async fn ack(&self, id: &JobId) -> Result<()> {
            for jobs in self.queues.lock().unwrap().values_mut() {
                jobs.retain(|j| j.id() != id);
            }
            Ok(())
        }
        async fn nack(&self, _: &JobId) -> Result<()> {
            Ok(())
        }
        async fn working(&self, _: &JobId) -> Result<Duration> {
            Ok(Duration::ZERO)
        }
        async fn queue_len(&self, topic: &Topic) -> Result<u64> {
            Ok(self.len(topic) as u64)
        }
        async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>> {
            self.peeks.fetch_add(1, Ordering::SeqCst);
            if self.fail_peek.load(Ordering::SeqCst) {
                return Err(Error::backend("node down", true));
            }
            let queues = self.queues.lock().unwrap();
            Ok(queues
                .get(topic)
                .map_or_else(Vec::new, |jobs| jobs.iter().take(n).cloned().collect()))
        }
        async fn close(&self) -> Result<()> {
            Ok(())
        }
    }

    fn registry() -> Topic {
        names::registry(&Topic::new("t").unwrap()).unwrap()
    }

    #[tokio::test]
    async fn refresh_replaces_the_previous_announcement() {
        let backend = Arc::new(MemBackend::default());
        let state = Arc::new(BroadcastState::default());
        let mut announcer = Announcer::new(Arc::clone(&backend), state, registry(), "g".to_owned());
        for _ in 0..5 {
            announcer.announce().await.unwrap();
            assert_eq!(backend.len(&registry()), 1);
        }
    }

    #[tokio::test]
    async fn groups_are_distinct_sorted_and_valid() {
        let backend = MemBackend::default();
        let reg = registry();
        for body in [&b"b"[..], b"a", b"b", b"bad name", b"\xff", b"a|x", b""] {
            backend.put(&reg, body);
        }
        let state = BroadcastState::default();
        let groups = state.groups(&backend, &reg, true).await.unwrap();
        assert_eq!(&groups[..], ["a".to_owned(), "b".to_owned()]);
    }

    #[tokio::test(start_paused = true)]
    async fn cache_serves_within_the_discovery_interval() {
        let backend = MemBackend::default();
        let reg = registry();
        let state = BroadcastState::default();
        state.set_config(BroadcastConfig::new().with_discovery_interval(Duration::from_secs(1)));
        assert!(state
            .groups(&backend, &reg, false)
            .await
            .unwrap()
            .is_empty());
        backend.put(&reg, b"g");
        assert!(state
            .groups(&backend, &reg, false)
            .await
            .unwrap()
            .is_empty());
        assert_eq!(backend.peeks.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_millis(1001)).await;
        assert_eq!(state.groups(&backend, &reg, false).await.unwrap().len(), 1);
        assert_eq!(backend.peeks.load(Ordering::SeqCst), 2);
        // A local join forgets the list.
        backend.put(&reg, b"h");
        state.invalidate(&reg).await;
        assert_eq!(state.groups(&backend, &reg, false).await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn failed_discovery_falls_back_to_the_last_list() {
        let backend = MemBackend::default();
        let reg = registry();
        let state = BroadcastState::default();
        state.set_config(BroadcastConfig::new().with_discovery_interval(Duration::ZERO));
        backend.fail_peek.store(true, Ordering::SeqCst);
        assert!(state.groups(&backend, &reg, false).await.is_err());
        backend.fail_peek.store(false, Ordering::SeqCst);
        backend.put(&reg, b"g");
        assert_eq!(state.groups(&backend, &reg, false).await.unwrap().len(), 1);
        backend.fail_peek.store(true, Ordering::SeqCst);
        assert_eq!(state.groups(&backend, &reg, false).await.unwrap().len(), 1);
        // An explicit fresh read reports the failure.
        assert!(state.groups(&backend, &reg, true).await.is_err());
    }
}
