//! The per-client list of crontabs, kept in the client's extensions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use ezmq_core::{Error, Result};
use tokio_util::sync::CancellationToken;

use crate::options::CrontabOptions;
use crate::spec::CronSpec;

/// One registered crontab, as listed by
/// [`CrontabExt::crontabs`](crate::CrontabExt::crontabs).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CrontabInfo {
    /// The name given at registration (the claim key shared by all
    /// participants).
    pub name: String,
    /// The cron expression as given at registration.
    pub spec: String,
    /// The options given at registration.
    pub options: CrontabOptions,
    /// The next tick after now, `None` when the schedule has no more ticks.
    /// Whether this client runs it depends on the claim.
    pub next_tick: Option<DateTime<Utc>>,
}

/// The crontabs of one client (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct CrontabRegistry {
    entries: Mutex<HashMap<String, Entry>>,
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) spec: Arc<CronSpec>,
    pub(crate) options: CrontabOptions,
    /// Cancelled to stop the schedule.
    pub(crate) cancel: CancellationToken,
    /// Cancelled by the scheduler once it starts no more runs.
    pub(crate) stopped: CancellationToken,
}

impl CrontabRegistry {
    /// Adds `name`; fails when this client already has a crontab of that
    /// name.
    pub(crate) fn insert(&self, name: &str, entry: Entry) -> Result<()> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.contains_key(name) {
            return Err(Error::invalid_option(
                "name",
                format!("a crontab named {name:?} is already registered in this client"),
            ));
        }
        entries.insert(name.to_owned(), entry);
        Ok(())
    }

    /// Takes `name` out of the registry.
    pub(crate) fn remove(&self, name: &str) -> Option<Entry> {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name)
    }

    /// Every crontab, sorted by name.
    pub(crate) fn list(&self) -> Vec<CrontabInfo> {
        let now = Utc::now();
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut list: Vec<CrontabInfo> = entries
            .iter()
            .map(|(name, entry)| CrontabInfo {
                name: name.clone(),
                spec: entry.spec.source().to_owned(),
                options: entry.options.clone(),
                next_tick: entry.spec.next_after(now),
            })
            .collect();
        list.sort_by(|a, b| a.name.cmp(&b.name));
        list
    }
}
