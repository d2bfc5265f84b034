//! Per-client state of feature crates (cron registry, reply router, ...).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// A type map where feature crates keep one value per client, created on
/// first use.
#[derive(Default)]
pub(crate) struct Extensions {
    map: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Extensions")
    }
}

impl Extensions {
    /// The value of type `T`, created by `init` the first time.
    pub(crate) fn get_or_init<T, F>(&self, init: F) -> Arc<T>
    where
        T: Any + Send + Sync,
        F: FnOnce() -> T,
    {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = map.get(&TypeId::of::<T>()) {
            if let Ok(value) = Arc::clone(value).downcast::<T>() {
                return value;
            }
        }
        let value = Arc::new(init());
        map.insert(
            TypeId::of::<T>(),
            Arc::clone(&value) as Arc<dyn Any + Send + Sync>,
        );
        value
    }
}
