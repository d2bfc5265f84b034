//! Settings that CONFIG SET can change while the node runs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// The password clients must AUTH with.
#[derive(Debug)]
pub(crate) struct AuthState {
    pass: Mutex<Option<String>>,
    required: AtomicBool,
    /// Changes whenever the password is set: connections must AUTH again.
    epoch: AtomicU64,
}

impl AuthState {
    /// With `pass` as the initial password.
    pub(crate) fn new(pass: Option<String>) -> AuthState {
        AuthState {
            required: AtomicBool::new(pass.is_some()),
            pass: Mutex::new(pass),
            epoch: AtomicU64::new(1),
        }
    }

    /// The current password epoch, `None` when no password is set.
    pub(crate) fn epoch_if_required(&self) -> Option<u64> {
        self.required
            .load(Ordering::Acquire)
            .then(|| self.epoch.load(Ordering::Acquire))
    }

    /// The password (CONFIG GET).
    pub(crate) fn get(&self) -> Option<String> {
        self.pass.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Sets or (with `None`) removes the password.
    pub(crate) fn set(&self, pass: Option<String>) {
        let mut p = self.pass.lock().unwrap_or_else(|e| e.into_inner());
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.required.store(pass.is_some(), Ordering::Release);
        *p = pass;
    }

    /// Checks a password; returns the epoch it is valid for.
    pub(crate) fn check(&self, candidate: &[u8]) -> Result<u64, AuthError> {
        let p = self.pass.lock().unwrap_or_else(|e| e.into_inner());
        let Some(pass) = p.as_deref() else {
            return Err(AuthError::NoPassword);
        };
        if constant_time_eq(pass.as_bytes(), candidate) {
            Ok(self.epoch.load(Ordering::Acquire))
        } else {
            Err(AuthError::Invalid)
        }
    }
}

/// Why AUTH failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthError {
    /// No password is set.
    NoPassword,
    /// Wrong password.
    Invalid,
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Plain settings kept for CONFIG GET / SET.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) hz: AtomicU64,
    pub(crate) timeout: AtomicU64,
    pub(crate) enqueue_jobs_once: AtomicBool,
    /// `CLUSTER LEAVING yes`.
    pub(crate) leaving: AtomicBool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            hz: AtomicU64::new(10),
            timeout: AtomicU64::new(0),
            enqueue_jobs_once: AtomicBool::new(true),
            leaving: AtomicBool::new(false),
        }
    }
}
