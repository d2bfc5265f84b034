//! A backend's own store of presence records, for brokers that cannot
//! peek (see [`presence`](crate::presence)).

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::Result;

/// Where a backend without [`Peek`](super::Peek) keeps presence records
/// ([`Backend::presence_store`](super::Backend::presence_store)). Core
/// writes one record per participant every
/// [`PRESENCE_HEARTBEAT`](crate::presence::PRESENCE_HEARTBEAT) and merges
/// what [`PresenceStore::read`] returns (newest record per participant,
/// expired ones dropped), so the store may return old or repeated records;
/// it must not miss one written within `window` before the read.
///
/// Backends with `Peek` need none: core then keeps the records on an
/// internal topic itself.
#[async_trait]
pub trait PresenceStore: Send + Sync {
    /// Stores one record (JSON), to be kept for at least `ttl`.
    async fn write(&self, record: Bytes, ttl: Duration) -> Result<()>;

    /// The records written in the last `window` at least, oldest first.
    async fn read(&self, window: Duration) -> Result<Vec<Bytes>>;
}
