//! What has been declared on a connection, so each queue, exchange and
//! binding is declared once per connection (again after a reconnect).

use std::collections::HashMap;
use std::sync::Mutex;

/// What a declaration made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Declared {
    /// A topic's queue.
    Queue = 1,
    /// A fan-out exchange.
    Exchange = 2,
    /// A queue's binding to the delay levels' deliver exchange.
    DeliverBinding = 4,
    /// The delay levels (one set per connection, named
    /// [`DELAY_LEVELS`]).
    DelayLevels = 8,
}

/// The name the delay levels are declared under (and named by in errors).
pub(crate) const DELAY_LEVELS: &str = "delay levels";

/// Name -> the kinds of [`Declared`] made under it, a bit each: a check
/// takes the name as it is, so the publish path builds no key.
#[derive(Debug, Default)]
pub(crate) struct DeclaredSet {
    names: Mutex<HashMap<String, u8>>,
}

impl DeclaredSet {
    /// True when `what` named `name` was declared.
    pub(crate) fn contains(&self, what: Declared, name: &str) -> bool {
        self.names
            .lock()
            .is_ok_and(|d| d.get(name).is_some_and(|kinds| kinds & what as u8 != 0))
    }

    /// Remembers that `what` named `name` is declared.
    pub(crate) fn insert(&self, what: Declared, name: &str) {
        if let Ok(mut names) = self.names.lock() {
            *names.entry(name.to_owned()).or_default() |= what as u8;
        }
    }

    /// Forgets a declaration (the broker deleted the queue).
    pub(crate) fn remove(&self, what: Declared, name: &str) {
        if let Ok(mut names) = self.names.lock() {
            if let Some(kinds) = names.get_mut(name) {
                *kinds &= !(what as u8);
                if *kinds == 0 {
                    names.remove(name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_under_one_name_are_separate() {
        let set = DeclaredSet::default();
        assert!(!set.contains(Declared::Queue, "orders"));
        set.insert(Declared::Queue, "orders");
        set.insert(Declared::DeliverBinding, "orders");
        assert!(set.contains(Declared::Queue, "orders"));
        assert!(!set.contains(Declared::Exchange, "orders"));
        assert!(!set.contains(Declared::Queue, "order"));
        set.remove(Declared::Queue, "orders");
        assert!(!set.contains(Declared::Queue, "orders"));
        assert!(set.contains(Declared::DeliverBinding, "orders"));
        set.remove(Declared::DeliverBinding, "orders");
        assert!(!set.contains(Declared::DeliverBinding, "orders"));
        assert!(set.names.lock().unwrap().is_empty());
    }
}
