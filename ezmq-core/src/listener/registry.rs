//! The client's list of its listeners, so that a client shutdown can hand
//! its grace period to every one of them.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::control::Control;

/// Every listener started by one client (drained ones are pruned).
#[derive(Debug, Default)]
pub(crate) struct Registry {
    listeners: Mutex<Vec<Arc<Control>>>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Vec<Arc<Control>>> {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn register(&self, control: Arc<Control>) {
        let mut listeners = self.lock();
        listeners.retain(|c| !c.is_done());
        listeners.push(control);
    }

    /// The listeners not yet drained.
    pub(crate) fn running(&self) -> Vec<Arc<Control>> {
        let mut listeners = self.lock();
        listeners.retain(|c| !c.is_done());
        listeners.clone()
    }

    /// Asks every listener to stop with `grace`.
    pub(crate) fn stop_all(&self, grace: Duration) {
        let listeners = std::mem::take(&mut *self.lock());
        for control in listeners {
            control.request_stop(grace);
        }
    }
}
