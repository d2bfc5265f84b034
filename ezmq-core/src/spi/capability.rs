//! What a backend can do beyond the core calls.

use std::fmt;

/// One optional ability of a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Capability {
    /// Pushes with a delay ([`PushOptions::delay`](crate::PushOptions::delay)).
    DelayedDelivery,
    /// Leases that a running handler can extend, so long handlers are not
    /// redelivered while they run ([`Settle::extend_lease`](super::Settle::extend_lease)).
    LeaseExtension,
    /// Counting waiting messages ([`QueueStats`](super::QueueStats)).
    QueueStats,
    /// Reading waiting messages without consuming them ([`Peek`](super::Peek)).
    Peek,
    /// A claim exactly one caller wins ([`ExclusiveClaim`](super::ExclusiveClaim)):
    /// distributed cron.
    ExclusiveClaim,
    /// Consumer groups that each get every message ([`FanOut`](super::FanOut)):
    /// broadcast.
    FanOut,
    /// Private reply inboxes ([`ReplyChannel`](super::ReplyChannel)):
    /// request-reply.
    RequestReply,
    /// A push with a message id
    /// ([`PushOptions::with_message_id`](crate::PushOptions::with_message_id))
    /// that the broker already stored (within the backend's documented
    /// window) stores nothing, atomically: the safe retry after an
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown).
    IdempotentPush,
    /// Finding jobs by id and state, cancelling and promoting them
    /// ([`JobStore`](super::JobStore)).
    JobStore,
    /// Cluster-wide rate limits on a topic's handler starts
    /// ([`ConsumeOptions::with_rate_limit`](crate::ConsumeOptions::with_rate_limit)):
    /// the backend's own [`RateLimiter`](super::RateLimiter), or core's,
    /// built on its [`ExclusiveClaim`](super::ExclusiveClaim).
    RateLimit,
    /// A cluster-wide limit on a topic's running handlers
    /// ([`ConsumeOptions::with_global_concurrency`](crate::ConsumeOptions::with_global_concurrency)):
    /// core's slots, built on the backend's
    /// [`ExclusiveClaim`](super::ExclusiveClaim).
    GlobalConcurrency,
    /// Job priorities
    /// ([`PushOptions::with_priority`](crate::PushOptions::with_priority)):
    /// core's lanes, a queue each, marked on the backend's
    /// [`ExclusiveClaim`](super::ExclusiveClaim).
    Priorities,
    /// Rate limits per key
    /// ([`ConsumeOptions::with_rate_limit_by`](crate::ConsumeOptions::with_rate_limit_by)):
    /// deliveries that can be deferred without counting an attempt
    /// ([`Settle::defer`](super::Settle::defer)), and the backend's own
    /// [`RateLimiter`](super::RateLimiter) or core's, built on its
    /// [`ExclusiveClaim`](super::ExclusiveClaim).
    RateLimitByKey,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: [Capability; 13] = [
        Capability::DelayedDelivery,
        Capability::LeaseExtension,
        Capability::QueueStats,
        Capability::Peek,
        Capability::ExclusiveClaim,
        Capability::FanOut,
        Capability::RequestReply,
        Capability::IdempotentPush,
        Capability::JobStore,
        Capability::RateLimit,
        Capability::GlobalConcurrency,
        Capability::Priorities,
        Capability::RateLimitByKey,
    ];

    /// A short human name, e.g. `delayed delivery`.
    pub fn name(self) -> &'static str {
        match self {
            Capability::DelayedDelivery => "delayed delivery",
            Capability::LeaseExtension => "lease extension",
            Capability::QueueStats => "queue stats",
            Capability::Peek => "peek",
            Capability::ExclusiveClaim => "exclusive claim",
            Capability::FanOut => "fan-out (consumer groups)",
            Capability::RequestReply => "request-reply inboxes",
            Capability::IdempotentPush => "idempotent push by message id",
            Capability::JobStore => "job store (jobs by id and state)",
            Capability::RateLimit => "rate limits across processes",
            Capability::GlobalConcurrency => "concurrency limits across processes",
            Capability::Priorities => "job priorities (lanes)",
            Capability::RateLimitByKey => "rate limits per key",
        }
    }

    const fn bit(self) -> u16 {
        1 << self as u16
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The set of [`Capability`]s a backend reports.
///
/// ```
/// use ezmq_core::spi::{Capabilities, Capability};
///
/// let caps = Capabilities::none().with(Capability::Peek);
/// assert!(caps.has(Capability::Peek));
/// assert!(!caps.has(Capability::FanOut));
/// assert_eq!(Capabilities::all().iter().count(), Capability::ALL.len());
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Capabilities(u16);

impl Capabilities {
    /// No optional ability.
    pub const fn none() -> Self {
        Capabilities(0)
    }

    /// Every optional ability.
    pub fn all() -> Self {
        Capability::ALL
            .iter()
            .fold(Self::none(), |caps, c| caps.with(*c))
    }

    /// This set plus `capability`.
    #[must_use]
    pub const fn with(self, capability: Capability) -> Self {
        Capabilities(self.0 | capability.bit())
    }

    /// This set without `capability`.
    #[must_use]
    pub const fn without(self, capability: Capability) -> Self {
        Capabilities(self.0 & !capability.bit())
    }

    /// True when `capability` is in the set.
    pub const fn has(self, capability: Capability) -> bool {
        self.0 & capability.bit() != 0
    }

    /// The capabilities in the set.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL.into_iter().filter(move |c| self.has(*c))
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl FromIterator<Capability> for Capabilities {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Self {
        iter.into_iter().fold(Self::none(), Self::with)
    }
}
