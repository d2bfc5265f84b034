//! The pages (GET), one file each.

pub(crate) mod cron;
pub(crate) mod groups;
pub(crate) mod health;
pub(crate) mod numbers;
pub(crate) mod overview;
pub(crate) mod processes;
pub(crate) mod topic;

use serde::Deserialize;

/// `?done=`: what the action that led here did, shown once.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Flash {
    pub(crate) done: Option<String>,
}
