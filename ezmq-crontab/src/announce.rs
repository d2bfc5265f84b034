//! The crontab registry in the broker, built on capability traits only:
//! what `ezmq cron list` reads.
//!
//! Every scheduler announces its crontab on the internal topic
//! `__ezmq|cron-registry` (see [`registry_topic`]): a small JSON
//! [`CrontabAnnouncement`] with the crontab's name, expression, time zone,
//! the last tick this participant ran, the next tick, and an expiry (the
//! message's ttl too). It announces when it starts, after every tick it
//! won, and again when its last announcement is half way to expiring,
//! from its own task ([`Announcer::run`]) so that the broker never delays a
//! tick.
//! Readers [`Peek`](ezmq_core::spi::Peek) the topic (nothing is consumed)
//! and merge the announcements per crontab ([`announced_crontabs`]).
//!
//! The topic stays small: about once a minute a participant compacts it —
//! it receives every announcement (the core `receive`), publishes again the
//! newest unexpired one of each participant and crontab, then acknowledges
//! what it received. A reader that peeks during those few milliseconds may
//! miss a crontab; an interrupted compaction loses nothing (the broker
//! redelivers what was not acknowledged, and duplicates merge).
//!
//! Announcing is best effort: a failure is logged, never fails a tick.
//! Backends without peek (RabbitMQ) skip it, as nobody could read it.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};
use ezmq_core::presence::PresenceEntry;
use ezmq_core::spi::{compact_topic, Backend, Capability};
use ezmq_core::{MqClient, PushOptions, Result, Topic};
use serde::{Deserialize, Serialize};
use tokio::sync::{watch, Mutex};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::spec::CronSpec;
use crate::timing::MIN_HOLD;
use crate::Tz;

/// The kind of a crontab's entry in its client's presence
/// ([`ezmq_core::presence`]).
pub(crate) const PRESENCE_KIND: &str = "crontab";
/// The presence entry's detail naming the crontab's expression.
pub(crate) const SPEC_DETAIL: &str = "spec";
/// The presence entry's detail naming the crontab's time zone.
pub(crate) const TIMEZONE_DETAIL: &str = "timezone";
/// The presence entry's detail holding the last tick this participant
/// ran (RFC 3339).
pub(crate) const LAST_TICK_DETAIL: &str = "last_tick";
/// The kind of the registry's internal topic name.
const REGISTRY_KIND: &str = "cron-registry";
/// Announcements read per peek by [`announced_crontabs`].
const READ_LIMIT: usize = 10_000;
/// Shortest life of an announcement.
const MIN_TTL: Duration = Duration::from_secs(10 * 60);
/// Longest life of an announcement.
const MAX_TTL: Duration = Duration::from_secs(45 * 24 * 3600);
/// How often one participant compacts the registry at most.
const COMPACT_EVERY: Duration = Duration::from_secs(60);
/// Longest an announcement or a compaction may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The internal topic every crontab announces itself on.
pub fn registry_topic() -> Result<Topic> {
    Topic::internal(REGISTRY_KIND, &[])
}

/// One participant's announcement of one crontab.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CrontabAnnouncement {
    /// The crontab's name.
    pub name: String,
    /// Its cron expression.
    pub spec: String,
    /// Its time zone (IANA name).
    pub timezone: String,
    /// Who announced: `host/pid` of the participant.
    pub participant: String,
    /// The last tick this participant ran, in Unix milliseconds.
    #[serde(default)]
    pub last_tick_ms: Option<i64>,
    /// When it announced, in Unix milliseconds.
    pub announced_at_ms: i64,
    /// When the announcement expires, in Unix milliseconds.
    pub expires_at_ms: i64,
}

/// A crontab as the registry shows it: its announcements merged.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CrontabStatus {
    /// The crontab's name.
    pub name: String,
    /// Its cron expression (from the newest announcement).
    pub spec: String,
    /// Its time zone (IANA name).
    pub timezone: String,
    /// The last tick any participant announced running.
    pub last_tick: Option<DateTime<Utc>>,
    /// The participant that ran it.
    pub last_tick_by: Option<String>,
    /// The next tick after now, from the expression.
    pub next_tick: Option<DateTime<Utc>>,
    /// The processes (`host/pid`) running it now, sorted.
    pub participants: Vec<String>,
}

/// The crontabs running on `client`'s broker now, sorted by name: those
/// a live participant ([`Admin::participants`](ezmq_core::Admin::participants))
/// runs, each with its live participants only. A crontab whose processes
/// all stopped leaves the list at once; one whose processes died, within
/// [`PRESENCE_EXPIRY`](ezmq_core::presence::PRESENCE_EXPIRY).
///
/// On a backend that cannot peek (RabbitMQ) the list comes from presence
/// alone: the last tick is the newest a live participant ran, as of its
/// last announcement (within
/// [`PRESENCE_HEARTBEAT`](ezmq_core::presence::PRESENCE_HEARTBEAT)). Fails with
/// [`Error::Unsupported`](ezmq_core::Error::Unsupported) on a backend
/// without presence.
pub async fn announced_crontabs<C: MqClient + ?Sized>(client: &C) -> Result<Vec<CrontabStatus>> {
    let runtime = client.runtime();
    let admin = client.admin();
    if !admin.has_presence() {
        return Err(runtime.unsupported(Capability::Peek));
    }
    let Some(peek) = runtime.backend().peek() else {
        return Ok(from_presence(&admin.participants().await?, Utc::now()));
    };
    let topic = registry_topic()?;
    let (jobs, live) = tokio::try_join!(peek.peek(&topic, READ_LIMIT), admin.participants())?;
    let announcements = jobs.iter().filter_map(|job| job.json().ok()).collect();
    let mut crontabs = merge(announcements, now_ms(), Utc::now());
    for crontab in &mut crontabs {
        crontab.participants.retain(|process| {
            live.iter()
                .any(|p| &p.process == process && p.has_entry(PRESENCE_KIND, &crontab.name))
        });
    }
    crontabs.retain(|c| !c.participants.is_empty());
    Ok(crontabs)
}

/// The crontabs live participants run, from their presence entries alone:
/// the last tick is the newest any of them ran (as of its last
/// announcement).
fn from_presence(
    live: &[ezmq_core::presence::Participant],
    now: DateTime<Utc>,
) -> Vec<CrontabStatus> {
    #[derive(Default)]
    struct Seen<'a> {
        entry: Option<&'a PresenceEntry>,
        participants: Vec<String>,
        last: Option<(DateTime<Utc>, String)>,
    }
    let mut by_name: BTreeMap<&str, Seen<'_>> = BTreeMap::new();
    for p in live {
        for entry in p.entries.iter().filter(|e| e.kind == PRESENCE_KIND) {
            let seen = by_name.entry(entry.name.as_str()).or_default();
            seen.entry.get_or_insert(entry);
            seen.participants.push(p.process.clone());
            let ran = entry
                .detail
                .get(LAST_TICK_DETAIL)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc));
            if let Some(ran) = ran {
                if seen.last.as_ref().is_none_or(|(last, _)| ran > *last) {
                    seen.last = Some((ran, p.process.clone()));
                }
            }
        }
    }
    by_name
        .into_iter()
        .filter_map(|(name, seen)| {
            let entry = seen.entry?;
            let spec = entry.detail.get(SPEC_DETAIL)?.clone();
            let timezone = entry.detail.get(TIMEZONE_DETAIL)?.clone();
            let mut participants = seen.participants;
            participants.sort();
            participants.dedup();
            let (last_tick, last_tick_by) = seen.last.unzip();
            Some(CrontabStatus {
                next_tick: Tz::from_str(&timezone)
                    .ok()
                    .and_then(|tz| CronSpec::parse(&spec, tz).ok())
                    .and_then(|spec| spec.next_after(now)),
                spec,
                timezone,
                last_tick,
                last_tick_by,
                participants,
                name: name.to_owned(),
            })
        })
        .collect()
}

/// Merges unexpired announcements per crontab.
fn merge(
    announcements: Vec<CrontabAnnouncement>,
    now_ms: i64,
    now: DateTime<Utc>,
) -> Vec<CrontabStatus> {
    let mut by_name: BTreeMap<String, Vec<CrontabAnnouncement>> = BTreeMap::new();
    for a in announcements
        .into_iter()
        .filter(|a| a.expires_at_ms > now_ms)
    {
        by_name.entry(a.name.clone()).or_default().push(a);
    }
    by_name
        .into_iter()
        .filter_map(|(name, list)| {
            let newest = list.iter().max_by_key(|a| a.announced_at_ms)?;
            let last = list
                .iter()
                .filter_map(|a| a.last_tick_ms.map(|t| (t, &a.participant)))
                .max_by_key(|(t, _)| *t);
            let mut participants: Vec<String> =
                list.iter().map(|a| a.participant.clone()).collect();
            participants.sort();
            participants.dedup();
            Some(CrontabStatus {
                spec: newest.spec.clone(),
                timezone: newest.timezone.clone(),
                next_tick: Tz::from_str(&newest.timezone)
                    .ok()
                    .and_then(|tz| CronSpec::parse(&newest.spec, tz).ok())
                    .and_then(|spec| spec.next_after(now)),
                last_tick: last.and_then(|(t, _)| DateTime::from_timestamp_millis(t)),
                last_tick_by: last.map(|(_, p)| p.clone()),
                participants,
                name,
            })
        })
        .collect()
}

/// One scheduler's announcer.
#[derive(Debug)]
pub(crate) struct Announcer {
    backend: Arc<dyn Backend>,
    name: Arc<str>,
    spec: Arc<CronSpec>,
    timezone: Tz,
    participant: String,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    last_tick_ms: Option<i64>,
    /// When this participant last compacted the registry.
    compacted_at: Option<tokio::time::Instant>,
}

impl Announcer {
    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        name: Arc<str>,
        spec: Arc<CronSpec>,
        timezone: Tz,
    ) -> Self {
        Announcer {
            backend,
            name,
            spec,
            timezone,
            participant: participant(),
            state: Mutex::new(State::default()),
        }
    }

    /// Announces until `cancel`: at once, after each tick the scheduler
    /// reports on `ran` (the tick it won), and when the last announcement is
    /// half way to expiring.
    pub(crate) async fn run(
        self,
        cancel: CancellationToken,
        mut ran: watch::Receiver<Option<DateTime<Utc>>>,
    ) {
        if !self.backend.capabilities().has(Capability::Peek) {
            return;
        }
        let mut tick = None;
        loop {
            let ttl = self.ttl();
            self.announce(tick.take(), ttl).await;
            tokio::select! {
                _ = cancel.cancelled() => return,
                changed = ran.changed() => match changed {
                    Ok(()) => tick = *ran.borrow_and_update(),
                    Err(_) => return,
                },
                _ = tokio::time::sleep(ttl / 2) => {}
            }
        }
    }

    /// How long an announcement lives: two periods and a minute, at least
    /// [`MIN_TTL`], at most [`MAX_TTL`].
    fn ttl(&self) -> Duration {
        let period = self
            .spec
            .next_after(Utc::now())
            .and_then(|next| self.spec.gap_after(next))
            .unwrap_or(MIN_HOLD);
        (period * 2 + Duration::from_secs(60)).clamp(MIN_TTL, MAX_TTL)
    }

    /// Publishes an announcement (with `ran` as this participant's last
    /// tick when given); compacts the registry about once a minute. Never
    /// fails: problems are logged.
    async fn announce(&self, ran: Option<DateTime<Utc>>, ttl: Duration) {
        let mut state = self.state.lock().await;
        let now = now_ms();
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        if let Some(tick) = ran {
            state.last_tick_ms = Some(tick.timestamp_millis());
        }
        let announcement = CrontabAnnouncement {
            name: self.name.to_string(),
            spec: self.spec.source().to_owned(),
            timezone: self.timezone.name().to_owned(),
            participant: self.participant.clone(),
            last_tick_ms: state.last_tick_ms,
            announced_at_ms: now,
            expires_at_ms: now.saturating_add(ttl_ms),
        };
        match tokio::time::timeout(CALL_TIMEOUT, self.publish(&announcement, ttl)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => debug!(cron = %self.name, cause = %e, "could not announce the crontab"),
            Err(_) => debug!(cron = %self.name, "announcing the crontab timed out"),
        }
        if state
            .compacted_at
            .is_none_or(|at| at.elapsed() >= COMPACT_EVERY)
        {
            state.compacted_at = Some(tokio::time::Instant::now());
            match tokio::time::timeout(CALL_TIMEOUT, self.compact()).await {
                Ok(Ok(n)) => debug!(cron = %self.name, kept = n, "compacted the crontab registry"),
                Ok(Err(e)) => {
                    debug!(cron = %self.name, cause = %e, "could not compact the crontab registry")
                }
                Err(_) => debug!(cron = %self.name, "compacting the crontab registry timed out"),
            }
        }
    }

    async fn publish(&self, announcement: &CrontabAnnouncement, ttl: Duration) -> Result<()> {
        let body = serde_json::to_vec(announcement)?;
        let options = PushOptions::default().with_ttl(ttl);
        self.backend
            .publish(&registry_topic()?, body.into(), &options)
            .await
            .map(drop)
    }

    /// Publishes again the newest unexpired announcement per participant
    /// and crontab, drops the rest. Returns how many were kept.
    async fn compact(&self) -> Result<usize> {
        let now = now_ms();
        compact_topic(self.backend.as_ref(), &registry_topic()?, |jobs| {
            let mut newest: HashMap<(String, String), CrontabAnnouncement> = HashMap::new();
            for a in jobs
                .iter()
                .filter_map(|job| job.json::<CrontabAnnouncement>().ok())
            {
                if a.expires_at_ms <= now {
                    continue;
                }
                let key = (a.name.clone(), a.participant.clone());
                match newest.get(&key) {
                    Some(kept) if kept.announced_at_ms >= a.announced_at_ms => {}
                    _ => {
                        newest.insert(key, a);
                    }
                }
            }
            newest
                .into_values()
                .filter_map(|a| {
                    let left = u64::try_from(a.expires_at_ms - now).unwrap_or(0).max(1);
                    let options = PushOptions::default().with_ttl(Duration::from_millis(left));
                    Some((serde_json::to_vec(&a).ok()?.into(), options))
                })
                .collect()
        })
        .await
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// This participant's name in announcements and run claims: `host/pid`.
pub(crate) fn participant() -> String {
    ezmq_core::presence::process_name()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(name: &str, who: &str, last: Option<i64>, at: i64, expires: i64) -> CrontabAnnouncement {
        CrontabAnnouncement {
            name: name.into(),
            spec: "0 * * * * *".into(),
            timezone: "UTC".into(),
            participant: who.into(),
            last_tick_ms: last,
            announced_at_ms: at,
            expires_at_ms: expires,
        }
    }

    #[test]
    fn presence_alone_lists_crontabs_with_the_newest_tick_run() {
        let live: Vec<ezmq_core::presence::Participant> =
            serde_json::from_value(serde_json::json!([
                {"id": "h/1/a", "process": "h/1", "started_at_ms": 0, "announced_at_ms": 1,
                 "expires_at_ms": 2, "entries": [
                    {"kind": "crontab", "name": "report",
                     "detail": {"spec": "0 * * * * *", "timezone": "UTC",
                                "last_tick": "2026-12-07T10:00:00.000Z"}},
                    {"kind": "other", "name": "x"}]},
                {"id": "h/2/b", "process": "h/2", "started_at_ms": 0, "announced_at_ms": 1,
                 "expires_at_ms": 2, "entries": [
                    {"kind": "crontab", "name": "report",
                     "detail": {"spec": "0 * * * * *", "timezone": "UTC",
                                "last_tick": "2026-12-07T10:01:00.000Z"}}]},
                {"id": "h/3/c", "process": "h/3", "started_at_ms": 0, "announced_at_ms": 1,
                 "expires_at_ms": 2, "entries": [
                    {"kind": "crontab", "name": "report",
                     "detail": {"spec": "0 * * * * *", "timezone": "UTC"}}]}
            ]))
            .unwrap();
        let now = Utc::now();
        let listed = from_presence(&live, now);
        assert_eq!(listed.len(), 1, "{listed:?}");
        let r = &listed[0];
        assert_eq!(
            (r.name.as_str(), r.spec.as_str(), r.timezone.as_str()),
            ("report", "0 * * * * *", "UTC")
        );
        assert_eq!(r.participants, ["h/1", "h/2", "h/3"]);
        assert_eq!(
            r.last_tick.map(|t| t.to_rfc3339()).as_deref(),
            Some("2026-12-07T10:01:00+00:00")
        );
        assert_eq!(r.last_tick_by.as_deref(), Some("h/2"));
        assert!(r.next_tick.is_some_and(|t| t > now));
    }

    #[test]
    fn merges_per_crontab_and_drops_expired() {
        let now = Utc::now();
        let list = vec![
            a("report", "h/1", Some(1_000), 10, 500),
            a("report", "h/2", Some(2_000), 20, 500),
            a("report", "h/2", None, 5, 500),
            a("gone", "h/1", Some(1), 1, 50),
        ];
        let merged = merge(list, 100, now);
        assert_eq!(merged.len(), 1);
        let r = &merged[0];
        assert_eq!(r.name, "report");
        assert_eq!(r.participants, ["h/1", "h/2"]);
        assert_eq!(r.last_tick.map(|t| t.timestamp_millis()), Some(2_000));
        assert_eq!(r.last_tick_by.as_deref(), Some("h/2"));
        assert!(r.next_tick.is_some_and(|t| t > now));
    }

    #[tokio::test]
    async fn compaction_keeps_the_newest_unexpired_announcement_per_participant() {
        use ezmq_core::MqClient;
        let broker = ezmq_test_support::TestBroker::start().await;
        let client = broker.client().await;
        let backend = Arc::clone(client.runtime().backend());
        let name = broker.unique_topic("compact");
        let spec = Arc::new(CronSpec::parse("0 * * * * *", Tz::UTC).unwrap());
        let announcer = Announcer::new(
            Arc::clone(&backend),
            Arc::from(name.as_str()),
            spec,
            Tz::UTC,
        );
        let now = now_ms();
        for (who, at, expires) in [
            ("h/1", now - 3, now + 60_000),
            ("h/1", now - 1, now + 60_000),
            ("h/1", now - 2, now + 60_000),
            ("h/2", now - 5, now - 1),
        ] {
            let mut a = a(&name, who, Some(at), at, expires);
            a.spec = "0 * * * * *".into();
            announcer
                .publish(&a, Duration::from_secs(60))
                .await
                .unwrap();
        }
        announcer.compact().await.unwrap();
        let peek = backend.peek().unwrap();
        let left: Vec<CrontabAnnouncement> = peek
            .peek(&registry_topic().unwrap(), 1000)
            .await
            .unwrap()
            .iter()
            .filter_map(|j| j.json::<CrontabAnnouncement>().ok())
            .filter(|a| a.name == name)
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(left[0].participant, "h/1");
        assert_eq!(left[0].announced_at_ms, now - 1);
        client.shutdown(Duration::from_secs(5)).await.unwrap();
    }

    #[test]
    fn the_registry_topic_is_internal() {
        assert!(registry_topic().unwrap().is_internal());
    }
}
