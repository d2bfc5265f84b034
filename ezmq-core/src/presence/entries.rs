//! One client's presence state: who it is, the entries registered on it,
//! and the signal that wakes its announcer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::{now_ms, process_name, PresenceEntry};

/// A client's presence: its identity and registered entries.
#[derive(Debug)]
pub(crate) struct Presence {
    id: String,
    process: String,
    started_at_ms: i64,
    entries: Mutex<BTreeMap<u64, PresenceEntry>>,
    next_key: AtomicU64,
    /// Wakes the announcer: something changed.
    changed: Notify,
    /// Set once the announcer task was spawned.
    announcing: AtomicBool,
}

impl Presence {
    pub(crate) fn new() -> Self {
        let process = process_name();
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        Presence {
            id: format!("{process}/{}", &suffix[..8]),
            process,
            started_at_ms: now_ms(),
            entries: Mutex::new(BTreeMap::new()),
            next_key: AtomicU64::new(0),
            changed: Notify::new(),
            announcing: AtomicBool::new(false),
        }
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn process(&self) -> &str {
        &self.process
    }

    pub(crate) fn started_at_ms(&self) -> i64 {
        self.started_at_ms
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, PresenceEntry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `entry` until the returned guard is dropped.
    pub(crate) fn register(self: &Arc<Self>, entry: PresenceEntry) -> PresenceGuard {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(key, entry);
        self.changed.notify_one();
        PresenceGuard {
            presence: Arc::clone(self),
            key,
        }
    }

    /// The registered entries, sorted.
    pub(crate) fn entries(&self) -> Vec<PresenceEntry> {
        let mut entries: Vec<_> = self.lock().values().cloned().collect();
        entries.sort();
        entries.dedup();
        entries
    }

    /// Wakes the announcer to write a record now.
    pub(crate) fn changed(&self) {
        self.changed.notify_one();
    }

    /// Completes at the next change.
    pub(crate) async fn next_change(&self) {
        self.changed.notified().await;
    }

    /// True the first time only: the caller spawns the announcer.
    pub(crate) fn claim_announcer(&self) -> bool {
        !self.announcing.swap(true, Ordering::AcqRel)
    }
}

/// Keeps an entry registered in the client's presence
/// ([`Runtime::presence_entry`](crate::spi::Runtime::presence_entry)); the
/// entry leaves at the next announcement once this is dropped.
#[derive(Debug)]
#[must_use = "the entry leaves when the guard is dropped"]
pub struct PresenceGuard {
    presence: Arc<Presence>,
    key: u64,
}

impl PresenceGuard {
    /// Sets `key` to `value` in the entry's
    /// [`detail`](super::PresenceEntry::detail) (a crontab's last tick,
    /// say). Readers see it with the client's next announcement, within
    /// [`PRESENCE_HEARTBEAT`](super::PRESENCE_HEARTBEAT): nothing is
    /// written for it alone.
    pub fn set_detail(&self, key: impl Into<String>, value: impl Into<String>) {
        if let Some(entry) = self.presence.lock().get_mut(&self.key) {
            entry.detail.insert(key.into(), value.into());
        }
    }
}

impl Drop for PresenceGuard {
    fn drop(&mut self) {
        self.presence.lock().remove(&self.key);
        self.presence.changed();
    }
}
