//! Presence: which processes run which listeners (and crontabs, and what
//! else a feature crate registers) right now, across every process on a
//! broker. What `ezmq listeners`, `ezmq topics`, the live `ezmq cron list`
//! and `ezmq groups` read.
//!
//! Every client that runs a listener or holds a registered entry
//! ([`Runtime::presence_entry`](crate::spi::Runtime::presence_entry))
//! announces a [`Participant`] record on the internal topic
//! `__ezmq|presence`: at once, on every change, and every
//! [`PRESENCE_HEARTBEAT`]. A record expires [`PRESENCE_EXPIRY`] after it was
//! written, so a process that died leaves the view within that bound; a
//! client that shuts down writes a last record saying it is gone, and
//! leaves at once. A client that only pushes announces nothing and costs
//! nothing.
//!
//! Built on capability traits only: records are published with a ttl,
//! read with [`Peek`](crate::spi::Peek), and about once a minute each
//! participant compacts the topic when it holds more than 200 records
//! (receives every record, publishes again the newest unexpired one per
//! participant, acknowledges the rest), as the crontab registry does. A broker that cannot peek keeps them in its
//! own [`PresenceStore`](crate::spi::PresenceStore) (RabbitMQ: a stream);
//! one with neither announces nothing, and reading fails with
//! [`Error::Unsupported`](crate::Error::Unsupported).

mod announcer;
mod entries;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::spi::{Backend, Capability};
use crate::topic::Topic;

pub(crate) use self::announcer::run as announce;
pub(crate) use self::entries::Presence;
pub use self::entries::PresenceGuard;

/// How often a participant writes its record.
pub const PRESENCE_HEARTBEAT: Duration = Duration::from_secs(5);

/// How long a record stays valid after it was written: a process that
/// died without a word leaves the view within this bound.
pub const PRESENCE_EXPIRY: Duration = Duration::from_secs(15);

/// The most records a read takes.
const READ_LIMIT: usize = 10_000;

/// The internal topic presence records are written to.
pub(crate) fn presence_topic() -> Result<Topic> {
    Topic::internal("presence", &[])
}

/// This process as presence and crontab records name it: `host/pid`,
/// the host from `HOSTNAME` (`localhost` without it).
pub fn process_name() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".to_owned());
    format!("{host}/{}", std::process::id())
}

/// One client's record: the listeners it runs and the entries it
/// registered, as of its last announcement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Participant {
    /// Unique per client: `host/pid/<8 hex digits>`.
    pub id: String,
    /// The process: `host/pid` (what crontab records name).
    pub process: String,
    /// When the client was created, in Unix milliseconds.
    pub started_at_ms: i64,
    /// When this record was written, in Unix milliseconds.
    pub announced_at_ms: i64,
    /// When this record expires, in Unix milliseconds.
    pub expires_at_ms: i64,
    /// True in the last record of a client that shut down.
    #[serde(default)]
    pub gone: bool,
    /// The listeners it runs.
    #[serde(default)]
    pub listeners: Vec<ListenerPresence>,
    /// What feature crates registered (a crontab, say).
    #[serde(default)]
    pub entries: Vec<PresenceEntry>,
}

/// One running listener, as its participant announced it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListenerPresence {
    /// The topic it consumes (the broadcast topic for a group member).
    pub topic: String,
    /// The consumer group, for a broadcast group's member.
    #[serde(default)]
    pub group: Option<String>,
    /// Its concurrency limit.
    pub concurrency: usize,
    /// Handlers it was running.
    pub in_flight: usize,
    /// Jobs its handler ran successfully since it started (a rate is the
    /// difference between two records over their time apart).
    #[serde(default)]
    pub succeeded: u64,
    /// Handler runs that failed (retried or dead-lettered) since it
    /// started.
    #[serde(default)]
    pub failed: u64,
    /// True while it was paused (here or cluster-wide).
    pub paused: bool,
    /// When it started, in Unix milliseconds.
    pub started_at_ms: i64,
}

/// Something a feature crate registered as running in a participant.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PresenceEntry {
    /// What it is, e.g. `crontab`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// What else readers should know (a crontab's `spec` and `timezone`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub detail: BTreeMap<String, String>,
}

impl PresenceEntry {
    /// Entry `name` of `kind`.
    pub fn new(kind: impl Into<String>, name: impl Into<String>) -> Self {
        PresenceEntry {
            kind: kind.into(),
            name: name.into(),
            detail: BTreeMap::new(),
        }
    }

    /// Adds `key` = `value` to [`PresenceEntry::detail`].
    #[must_use]
    pub fn with_detail(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.detail.insert(key.into(), value.into());
        self
    }
}

impl Participant {
    /// True when it runs entry `name` of `kind`.
    pub fn has_entry(&self, kind: &str, name: &str) -> bool {
        self.entries
            .iter()
            .any(|e| e.kind == kind && e.name == name)
    }
}

/// The live participants on `backend`'s broker, sorted by id: what
/// [`Admin::participants`](crate::Admin::participants) returns, for
/// feature crates that hold a backend (the crontab scheduler checks a run
/// claim's holder with it). Fails with
/// [`Error::Unsupported`](crate::Error::Unsupported) without
/// [`Capability::Peek`].
pub async fn live(backend: &dyn Backend) -> Result<Vec<Participant>> {
    let records = if let Some(store) = backend.presence_store() {
        store
            .read(PRESENCE_EXPIRY + PRESENCE_HEARTBEAT)
            .await?
            .iter()
            .filter_map(|record| serde_json::from_slice(record).ok())
            .collect()
    } else {
        let peek = backend.peek().ok_or(crate::Error::Unsupported {
            backend: backend.name(),
            capability: Capability::Peek,
        })?;
        let jobs = peek.peek(&presence_topic()?, READ_LIMIT).await?;
        jobs.iter().filter_map(|job| job.json().ok()).collect()
    };
    Ok(merge(records, now_ms()))
}

/// True when `backend`'s broker keeps presence: it can peek (core keeps
/// the records on an internal topic) or has a
/// [`PresenceStore`](crate::spi::PresenceStore) of its own (RabbitMQ).
pub fn available(backend: &dyn Backend) -> bool {
    backend.capabilities().has(Capability::Peek) || backend.presence_store().is_some()
}

/// The newest record per participant; expired ones and those of clients
/// that shut down left out.
fn merge(records: Vec<Participant>, now_ms: i64) -> Vec<Participant> {
    let mut newest = newest_per_participant(records);
    newest.retain(|p| !p.gone && p.expires_at_ms > now_ms);
    newest.sort_by(|a, b| a.id.cmp(&b.id));
    newest
}

/// The newest record of each participant.
fn newest_per_participant(records: Vec<Participant>) -> Vec<Participant> {
    let mut newest: HashMap<String, Participant> = HashMap::new();
    for record in records {
        match newest.get(&record.id) {
            Some(kept) if kept.announced_at_ms >= record.announced_at_ms => {}
            _ => {
                newest.insert(record.id.clone(), record);
            }
        }
    }
    newest.into_values().collect()
}

/// Now, in Unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    unix_ms(SystemTime::now())
}

/// `at` in Unix milliseconds (0 before the epoch).
pub(crate) fn unix_ms(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, at: i64, expires: i64, gone: bool) -> Participant {
        Participant {
            id: id.into(),
            process: "h/1".into(),
            started_at_ms: 0,
            announced_at_ms: at,
            expires_at_ms: expires,
            gone,
            listeners: Vec::new(),
            entries: vec![PresenceEntry::new("crontab", format!("{id}@{at}"))],
        }
    }

    #[test]
    fn the_newest_record_per_participant_wins_and_the_dead_leave() {
        let merged = merge(
            vec![
                record("a", 10, 500, false),
                record("a", 20, 500, false),
                record("b", 10, 500, false),
                record("b", 30, 500, true),
                record("c", 10, 90, false),
            ],
            100,
        );
        let ids: Vec<_> = merged.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["a"], "b shut down, c expired: {merged:?}");
        assert!(merged[0].has_entry("crontab", "a@20"));
        assert!(!merged[0].has_entry("crontab", "a@10"));
    }

    #[test]
    fn records_read_back_without_optional_fields() {
        let json = r#"{"id":"h/1/0a","process":"h/1","started_at_ms":1,
            "announced_at_ms":2,"expires_at_ms":3}"#;
        let p: Participant = serde_json::from_str(json).unwrap();
        assert!(!p.gone && p.listeners.is_empty() && p.entries.is_empty());
    }

    #[test]
    fn the_presence_topic_is_internal() {
        assert!(presence_topic().unwrap().is_internal());
        assert!(process_name().contains('/'));
    }
}
