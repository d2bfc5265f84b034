//! Memory limits on client input: the query-buffer budget shared by every
//! connection of a node, and the per-connection share of it.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Largest multibulk argument count accepted before AUTH (as Redis >= 6.2).
pub(crate) const UNAUTH_MAX_ARGS: usize = 10;
/// Largest bulk string accepted before AUTH (as Redis >= 6.2).
pub(crate) const UNAUTH_MAX_BULK: usize = 16 * 1024;
/// A connection may always hold this much buffered input, even when the
/// shared budget is used up, so small requests never fail.
pub(crate) const FREE_BUFFER_BYTES: usize = 64 * 1024;

/// Bytes of query buffers held by all connections of a node together.
#[derive(Debug)]
pub(crate) struct QueryBudget {
    used: AtomicUsize,
    max: usize,
}

impl QueryBudget {
    /// A budget of `max` bytes (0 = unlimited).
    pub(crate) fn new(max: usize) -> QueryBudget {
        QueryBudget {
            used: AtomicUsize::new(0),
            max,
        }
    }

    /// Bytes currently held by every query buffer together.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The configured limit (0 = unlimited).
    pub(crate) fn max(&self) -> usize {
        self.max
    }
}

/// One connection's share of the [`QueryBudget`]; released on drop.
#[derive(Debug)]
pub(crate) struct BufferAccount<'a> {
    budget: &'a QueryBudget,
    held: usize,
}

impl<'a> BufferAccount<'a> {
    /// An account holding nothing yet.
    pub(crate) fn new(budget: &'a QueryBudget) -> BufferAccount<'a> {
        BufferAccount { budget, held: 0 }
    }

    /// Records that the connection now holds `bytes` of buffers. Returns
    /// false when that takes the node over its budget and the connection
    /// holds more than [`FREE_BUFFER_BYTES`]: the caller must then drop it.
    pub(crate) fn update(&mut self, bytes: usize) -> bool {
        if bytes >= self.held {
            let delta = bytes - self.held;
            self.held = bytes;
            if delta == 0 {
                return true;
            }
            let total = self.budget.used.fetch_add(delta, Ordering::AcqRel) + delta;
            self.budget.max == 0 || total <= self.budget.max || bytes <= FREE_BUFFER_BYTES
        } else {
            self.budget
                .used
                .fetch_sub(self.held - bytes, Ordering::AcqRel);
            self.held = bytes;
            true
        }
    }
}

impl Drop for BufferAccount<'_> {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.held, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_and_refuses_over_budget() {
        let budget = QueryBudget::new(1 << 20);
        let mut a = BufferAccount::new(&budget);
        let mut b = BufferAccount::new(&budget);
        assert!(a.update(800 << 10));
        assert!(b.update(FREE_BUFFER_BYTES)); // small: always allowed
        assert!(!b.update(300 << 10)); // over the shared budget
        assert!(a.update(16 << 10));
        assert_eq!(budget.used(), (16 << 10) + (300 << 10));
        drop(a);
        drop(b);
        assert_eq!(budget.used(), 0);
    }
}
