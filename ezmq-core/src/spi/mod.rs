//! The backend SPI: what a broker crate implements so that
//! [`Client`](crate::Client) and every feature built on it work unchanged,
//! and the plumbing feature crates (cron, broadcast, request-reply) build
//! on. Applications do not need anything here.
//!
//! The core trait, [`Backend`], is small: publish with broker confirmation,
//! receive [`Delivery`]s, close. Each delivery settles itself through the
//! [`DeliveryHandle`] it carries (ack, retry after a delay, give back, and
//! where the broker can, extend its lease), as lapin's `Acker` and
//! JetStream's `Message` do.
//!
//! Optional abilities are separate small traits — [`QueueStats`], [`Peek`],
//! [`ExclusiveClaim`], [`FanOut`], [`ReplyChannel`], [`JobStore`],
//! [`RateLimiter`] — that a backend hands
//! out from [`Backend`]'s accessors. The [`Capabilities`] report,
//! [`Backend::capabilities`], is derived: one capability per accessor that
//! returns `Some`, plus the abilities that are a flag on the core calls
//! ([`Backend::abilities`]: delayed delivery, lease extension, idempotent
//! push), so what a backend reports is what it hands out. A feature that
//! needs a missing ability fails when it is registered with
//! [`Error::Unsupported`](crate::Error::Unsupported).

mod backend;
mod capability;
mod claim;
mod compaction;
mod delivery;
pub mod envelope;
mod failure_text;
mod fan_out;
mod job_store;
pub mod option_value;
mod presence_store;
pub mod protocol_probe;
mod rate_limiter;
mod reply;
mod runtime;
mod source;
mod stats;
pub mod url_redaction;

pub use backend::Backend;
pub use capability::{Capabilities, Capability};
pub use claim::{ClaimOutcome, ExclusiveClaim, MAX_CLAIM_HOLD};
pub use compaction::compact_topic;
pub use delivery::{Delivery, DeliveryHandle, Settle};
pub use failure_text::{error_chain, panic_message};
pub use fan_out::{FanOut, GroupInfo, GroupMembership};
pub use job_store::{Cancelled, JobInfo, JobState, JobStore};
pub use presence_store::PresenceStore;
pub use rate_limiter::{Grant, RateLimiter, Reservation};
pub use reply::{Inbox, ReplyChannel};
pub use runtime::Runtime;
pub use source::Source;
pub use stats::{Peek, QueueStats};
