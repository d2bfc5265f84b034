//! Kafka-only push options, attached with
//! [`PushOptions::with_backend_options`](ezmq_core::PushOptions::with_backend_options).

/// Options only Kafka has, for one push. Other backends ignore them.
///
/// **Key order.** Jobs pushed with the same key go to the same partition
/// (Kafka's murmur2 partitioner), and a listener never starts a keyed
/// job while an earlier job of the same key in that partition is
/// unfinished: it runs them one at a time, in the order they were
/// stored, retries included (a retry runs in place, so the key waits for
/// it). Jobs of other keys, and jobs without one, still run concurrently
/// up to the listener's concurrency.
///
/// What it costs: a failing keyed job holds its key, and its partition's
/// commit, for up to its attempts' backoffs. Order holds within one
/// topic and one priority lane; a delayed job takes its place in the
/// order when it becomes due, not when it was pushed.
///
/// ```
/// use ezmq_core::PushOptions;
/// use ezmq_kafka::KafkaPushOptions;
///
/// let opts = PushOptions::new().with_backend_options(KafkaPushOptions::new().with_key("customer-42"));
/// assert_eq!(
///     opts.backend_options::<KafkaPushOptions>().and_then(|o| o.key.as_deref()),
///     Some("customer-42")
/// );
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KafkaPushOptions {
    /// The record's key: jobs of one key run one at a time, in order.
    pub key: Option<String>,
}

impl KafkaPushOptions {
    /// No key.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`KafkaPushOptions::key`].
    #[must_use]
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
}

/// The key `options` carry, if any.
pub(crate) fn key_of(options: &ezmq_core::PushOptions) -> Option<&str> {
    options
        .backend_options::<KafkaPushOptions>()
        .and_then(|o| o.key.as_deref())
}
