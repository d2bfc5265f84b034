//! Group membership: announcements written by live members into a
//! per-topic registry queue, and the producers' cached reading of it.
//!
//! Nobody consumes a registry queue. Every announcement is a replicated job
//! whose body is the group name and whose TTL is the group's retention;
//! producers read the queue with a non-consuming, cluster-wide `QPEEK`. A
//! member replaces its previous announcement at each refresh (add the new
//! one, then `ACKJOB` the old one, a job nobody fetched), so a registry
//! holds about one job per live member plus one per member that stopped
//! less than a retention ago.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::GroupMembership;
use ezmq_core::{Error, Job, JobId, PushOptions, Result, Topic};
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::backend::DisqueBackend;
use crate::push_options::DisquePushOptions;

/// How long a producer reuses the group list it read. A group whose first
/// member joined on another client is included in every broadcast pushed
/// at least this long afterwards (on the joining client, at once).
pub(crate) const DISCOVERY_INTERVAL: Duration = Duration::from_secs(1);

/// The most announcements read per discovery (about one per live member).
pub(crate) const DISCOVERY_LIMIT: usize = 10_000;

/// Longest redelivery time of an announcement's queued copy (it matters
/// only when the node holding it is lost: a replica queues its copy after
/// this long).
const MAX_ANNOUNCE_RETRY: Duration = Duration::from_secs(30);

/// One read of a registry.
#[derive(Debug)]
pub(crate) struct RegistryRead {
    /// The announcements found.
    pub(crate) jobs: Vec<Job>,
    /// False when some node could not be read, so announcements queued
    /// there are missing.
    pub(crate) complete: bool,
}

/// Why a broadcast found no group to send to.
#[derive(Debug, thiserror::Error)]
#[error(
    "the broadcast registry of topic {topic:?} could not be read on every node and no \
     consumer group is known; nothing was stored"
)]
pub(crate) struct RegistryUnavailable {
    /// The broadcast topic.
    pub(crate) topic: String,
}

/// Group lists by registry queue, per backend. The async mutex of each
/// slot makes concurrent producers of one topic share a single read.
#[derive(Debug, Default)]
pub(crate) struct FanOutState {
    cache: Mutex<HashMap<Topic, Arc<tokio::sync::Mutex<Option<Cached>>>>>,
}

/// A group list read from a registry.
#[derive(Debug)]
struct Cached {
    groups: Arc<[Topic]>,
    /// When the read that produced `groups` started.
    read_at: Instant,
}

impl FanOutState {
    fn lock_cache(
        &self,
    ) -> MutexGuard<'_, HashMap<Topic, Arc<tokio::sync::Mutex<Option<Cached>>>>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn slot(&self, registry: &Topic) -> Arc<tokio::sync::Mutex<Option<Cached>>> {
        Arc::clone(self.lock_cache().entry(registry.clone()).or_default())
    }

    /// Forgets the cached group list of `registry`, so the next broadcast
    /// reads it again (a member of this backend just joined).
    pub(crate) async fn invalidate(&self, registry: &Topic) {
        let slot = self.slot(registry);
        *slot.lock().await = None;
    }

    /// The groups of `registry` (broadcast topic `topic`), read by `read`
    /// at most [`DISCOVERY_INTERVAL`] ago.
    ///
    /// - A complete read is cached and used.
    /// - A partial read (some node unreachable) is merged with the cached
    ///   list, if any, and not cached; when that leaves no group at all it
    ///   is an error ([`RegistryUnavailable`]), not a silent no-op.
    /// - A failed read falls back to the cached list (logged), else fails.
    pub(crate) async fn groups<F, Fut>(
        &self,
        topic: &Topic,
        registry: &Topic,
        read: F,
    ) -> Result<Arc<[Topic]>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<RegistryRead>>,
    {
        let slot = self.slot(registry);
        let mut cached = slot.lock().await;
        if let Some(c) = cached.as_ref() {
            if c.read_at.elapsed() < DISCOVERY_INTERVAL {
                return Ok(Arc::clone(&c.groups));
            }
        }
        let read_at = Instant::now();
        match read().await {
            Ok(RegistryRead {
                jobs,
                complete: true,
            }) => {
                let groups: Arc<[Topic]> = group_names(registry, &jobs).into_iter().collect();
                *cached = Some(Cached {
                    groups: Arc::clone(&groups),
                    read_at,
                });
                Ok(groups)
            }
            Ok(RegistryRead { jobs, .. }) => {
                let mut groups = group_names(registry, &jobs);
                if let Some(c) = cached.as_ref() {
                    groups.extend(c.groups.iter().cloned());
                }
                if groups.is_empty() {
                    return Err(Error::backend(
                        RegistryUnavailable {
                            topic: topic.to_string(),
                        },
                        true,
                    ));
                }
                warn!(%topic, groups = groups.len(),
                    "some Disque nodes could not be read; broadcasting to the groups found and the last known ones");
                Ok(groups.into_iter().collect())
            }
            Err(err) => match cached.as_ref() {
                Some(c) => {
                    warn!(%topic, cause = %err, age = ?c.read_at.elapsed(),
                        "group discovery failed; using the last known groups");
                    Ok(Arc::clone(&c.groups))
                }
                None => Err(err),
            },
        }
    }
}

/// The distinct, valid group names announced in `jobs`, sorted.
fn group_names(registry: &Topic, jobs: &[Job]) -> BTreeSet<Topic> {
    if jobs.len() >= DISCOVERY_LIMIT {
        warn!(%registry, limit = DISCOVERY_LIMIT,
            "the registry holds at least the discovery limit of announcements; groups may be missed");
    }
    let mut groups = BTreeSet::new();
    for job in jobs {
        match std::str::from_utf8(job.body()).map(Topic::new) {
            Ok(Ok(group)) => {
                groups.insert(group);
            }
            _ => debug!(%registry, job_id = %job.id(), "ignoring a malformed announcement"),
        }
    }
    debug!(%registry, announcements = jobs.len(), groups = groups.len(), "groups discovered");
    groups
}

/// One member's announcement, kept alive by [`GroupMembership::refresh`].
#[derive(Debug)]
pub(crate) struct Membership {
    backend: DisqueBackend,
    registry: Topic,
    group: Topic,
    retention: Duration,
    /// The member's current announcement, replaced at each refresh.
    last: tokio::sync::Mutex<Option<JobId>>,
}

impl Membership {
    pub(crate) fn new(
        backend: DisqueBackend,
        registry: Topic,
        group: Topic,
        retention: Duration,
    ) -> Self {
        Membership {
            backend,
            registry,
            group,
            retention,
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// Stores a fresh announcement, then drops the previous one.
    pub(crate) async fn announce(&self) -> Result<()> {
        let mut last = self.last.lock().await;
        let options = announce_options(self.retention);
        let id = self
            .backend
            .add(
                &self.registry,
                Bytes::copy_from_slice(self.group.as_str().as_bytes()),
                &options,
            )
            .await?;
        debug!(registry = %self.registry, group = %self.group, job_id = %id, "announced");
        if let Some(previous) = last.replace(id) {
            // Only keeps the registry small: if it fails, the old
            // announcement simply expires with its TTL.
            if let Err(err) = self.backend.ack(&previous).await {
                debug!(job_id = %previous, cause = %err, "could not drop a previous announcement");
            }
        }
        Ok(())
    }
}

/// Announcements: TTL = the retention, replicated like any job, redelivery
/// time about the refresh interval.
fn announce_options(retention: Duration) -> PushOptions {
    let retention = retention.max(Duration::from_secs(1));
    let retry = (retention / 3).clamp(Duration::from_secs(1), MAX_ANNOUNCE_RETRY);
    PushOptions::new()
        .with_ttl(retention)
        .with_backend_options(DisquePushOptions::new().with_retry(retry))
}

#[async_trait]
impl GroupMembership for Membership {
    /// Adds a fresh announcement and drops the previous one.
    async fn refresh(&self) -> Result<()> {
        self.announce().await
    }

    /// Nothing to do: the last announcement stays until its TTL, so the
    /// group stays in fan-out (and keeps its copies) for one retention,
    /// long enough for a restarted member to pick them up.
    async fn leave(&self) -> Result<()> {
        debug!(registry = %self.registry, group = %self.group,
            "member left; the group stays in fan-out until its last announcement expires");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn topic() -> Topic {
        Topic::new("t").unwrap()
    }

    fn registry() -> Topic {
        super::super::names::registry(&topic()).unwrap()
    }

    fn jobs(bodies: &[&'static [u8]]) -> Vec<Job> {
        bodies
            .iter()
            .enumerate()
            .map(|(i, b)| {
                Job::new(
                    JobId::new(format!("J{i}")),
                    registry(),
                    Bytes::from_static(b),
                )
            })
            .collect()
    }

    fn complete(bodies: &[&'static [u8]]) -> Result<RegistryRead> {
        Ok(RegistryRead {
            jobs: jobs(bodies),
            complete: true,
        })
    }

    fn names(groups: &[Topic]) -> Vec<&str> {
        groups.iter().map(Topic::as_str).collect()
    }

    #[tokio::test]
    async fn groups_are_distinct_sorted_and_valid() {
        let state = FanOutState::default();
        let groups = state
            .groups(&topic(), &registry(), || async {
                complete(&[b"b", b"a", b"b", b"bad name", b"\xff", b"a|x", b""])
            })
            .await
            .unwrap();
        assert_eq!(names(&groups), ["a", "b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn cache_serves_within_the_discovery_interval() {
        let state = FanOutState::default();
        let reads = AtomicUsize::new(0);
        let read = |bodies: &'static [&'static [u8]]| {
            reads.fetch_add(1, Ordering::SeqCst);
            async move { complete(bodies) }
        };
        assert!(state
            .groups(&topic(), &registry(), || read(&[]))
            .await
            .unwrap()
            .is_empty());
        assert!(state
            .groups(&topic(), &registry(), || read(&[b"g"]))
            .await
            .unwrap()
            .is_empty());
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        tokio::time::advance(DISCOVERY_INTERVAL + Duration::from_millis(1)).await;
        let groups = state
            .groups(&topic(), &registry(), || read(&[b"g"]))
            .await
            .unwrap();
        assert_eq!(names(&groups), ["g"]);
        // A local join forgets the list.
        state.invalidate(&registry()).await;
        let groups = state
            .groups(&topic(), &registry(), || read(&[b"g", b"h"]))
            .await
            .unwrap();
        assert_eq!(names(&groups), ["g", "h"]);
        assert_eq!(reads.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn failed_discovery_falls_back_to_the_last_list() {
        let state = FanOutState::default();
        let down = || async { Err(Error::backend("node down", true)) };
        assert!(state.groups(&topic(), &registry(), down).await.is_err());
        state
            .groups(&topic(), &registry(), || async { complete(&[b"g"]) })
            .await
            .unwrap();
        tokio::time::sleep(DISCOVERY_INTERVAL).await;
        let groups = state.groups(&topic(), &registry(), down).await.unwrap();
        assert_eq!(names(&groups), ["g"]);
    }

    #[tokio::test]
    async fn a_partial_read_with_nothing_known_is_an_error() {
        let state = FanOutState::default();
        let partial = |bodies: &'static [&'static [u8]]| async move {
            Ok(RegistryRead {
                jobs: jobs(bodies),
                complete: false,
            })
        };
        let err = state
            .groups(&topic(), &registry(), || partial(&[]))
            .await
            .unwrap_err();
        assert!(err.is_retryable(), "{err}");
        assert!(err.to_string().contains("registry"), "{err}");
        // What a partial read finds is used, merged with the last list, and
        // not cached.
        let groups = state
            .groups(&topic(), &registry(), || partial(&[b"a"]))
            .await
            .unwrap();
        assert_eq!(names(&groups), ["a"]);
    }

    #[test]
    fn announcements_live_one_retention() {
        let o = announce_options(Duration::from_secs(3600));
        assert_eq!(o.ttl, Some(Duration::from_secs(3600)));
        let d = o.backend_options::<DisquePushOptions>().unwrap();
        assert_eq!(d.retry, Some(MAX_ANNOUNCE_RETRY));
        let o = announce_options(Duration::from_millis(500));
        assert_eq!(o.ttl, Some(Duration::from_secs(1)));
        assert!(o.validate().is_ok());
    }
}
