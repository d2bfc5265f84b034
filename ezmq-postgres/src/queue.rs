//! Queue names: what the `queue` column holds for each kind of source.

use ezmq_core::spi::Source;

/// The start of every reply inbox's queue name.
pub(crate) const INBOX_PREFIX: &str = "__ezmq|inbox|";

/// The queue of `source`: the topic's name, or `<topic>#<group>` for a
/// broadcast group (`#` is in no topic name, so the two never meet).
pub(crate) fn of(source: &Source) -> String {
    match source.group() {
        None => source.topic().as_str().to_owned(),
        Some(group) => format!("{}#{group}", source.topic()),
    }
}

/// True when `address` names a reply inbox.
pub(crate) fn is_inbox(address: &str) -> bool {
    address
        .strip_prefix(INBOX_PREFIX)
        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric()))
}
