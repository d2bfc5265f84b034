//! # ezmq-conformance
//!
//! One behaviour suite every ezmq backend runs against its real broker, in
//! the spirit of Watermill's universal Pub/Sub tests: the same cases, each
//! on its own topics, gated by the capabilities the backend reports.
//!
//! A backend's `tests/` implements [`Broker`] and expands
//! [`behaviour_suite!`]: one `#[tokio::test]` per case in a module
//! `behaviour`.
//!
//! ```no_run
//! // ezmq-disque/tests/behaviour.rs
//! use ezmq_conformance::{behaviour_suite, Broker};
//!
//! struct Disque;
//!
//! #[async_trait::async_trait]
//! impl Broker for Disque {
//!     fn name(&self) -> &'static str {
//!         "disque"
//!     }
//!     fn url(&self) -> String {
//!         "disque://127.0.0.1:7711".into()
//!     }
//!     async fn connect(&self) -> ezmq_core::Result<ezmq_core::Client> {
//!         ezmq_disque::connect_url("disque://127.0.0.1:7711").await
//!     }
//!     fn expected_capabilities(&self) -> ezmq_core::spi::Capabilities {
//!         ezmq_core::spi::Capabilities::all()
//!             .without(ezmq_core::spi::Capability::IdempotentPush)
//!     }
//! }
//!
//! behaviour_suite!(Disque);
//! # fn main() {}
//! ```
//!
//! See the crate README for what each case checks and the skip/require
//! rules ([`run`], [`REQUIRE_ENV`]).

mod broker;
pub mod cases;
mod doomed;
mod runner;
pub mod support;

pub use broker::Broker;
pub use doomed::Doomed;
pub use runner::{is_required, run, Ctx, CASE_DEADLINE, REQUIRE_ENV};

/// Every case of the suite, in the order [`behaviour_suite!`] lists them.
pub const CASES: &[&str] = &[
    "push_consume",
    "at_least_once_when_consumer_dies",
    "retry_with_backoff_then_dead_letter",
    "permanent_error_skips_retries",
    "delayed_delivery_never_early",
    "long_handler_gets_no_duplicate",
    "graceful_shutdown_loses_nothing",
    "concurrency_limit_respected",
    "headers_round_trip",
    "queue_len",
    "peek",
    "payload_and_topic_limits",
    "resumes_after_broker_restart",
    "cron_once_per_tick",
    "broadcast_groups",
    "request_reply",
    "capabilities_are_consistent",
    "idempotent_push_by_message_id",
    "one_job_id_through_delay_retry_dead_letter",
    "batch_push",
    "pause_and_resume_listener",
    "job_store_finds_cancels_and_promotes",
    "job_store_sees_ready_and_retrying_jobs",
    "cancel_never_races_delivery",
    "reschedule_moves_a_due_time",
    "unique_key_admits_one_job",
    "pause_stops_every_listener_of_a_topic",
    "cron_skips_overlapping_runs",
    "rate_limit_holds_across_clients",
    "rate_limit_by_key_keeps_quiet_keys_prompt",
    "global_concurrency_holds_across_clients",
    "high_jobs_overtake_a_backlog_without_starving_it",
    "priority_survives_delay_and_retry",
    "presence_shows_live_listeners",
    "health_reports_the_server",
];

/// Expands to `mod behaviour { ... }` with one `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` per behaviour,
/// each calling `$crate::run(<broker expr>, $crate::cases::<case>)`. The expression is evaluated inside the generated module
/// (use `super::*`), once per test.
///
/// The expression is evaluated inside an `async fn`, so it may `.await`
/// (`behaviour_suite!(MyBroker::start().await)`). The calling crate needs
/// `tokio` (with the `macros` and `rt-multi-thread` features) among its
/// dev-dependencies.
#[macro_export]
macro_rules! behaviour_suite {
    ($broker:expr) => {
        $crate::behaviour_suite!(@cases ($broker);
            push_consume,
            at_least_once_when_consumer_dies,
            retry_with_backoff_then_dead_letter,
            permanent_error_skips_retries,
            delayed_delivery_never_early,
            long_handler_gets_no_duplicate,
            graceful_shutdown_loses_nothing,
            concurrency_limit_respected,
            headers_round_trip,
            queue_len,
            peek,
            payload_and_topic_limits,
            resumes_after_broker_restart,
            cron_once_per_tick,
            broadcast_groups,
            request_reply,
            capabilities_are_consistent,
            idempotent_push_by_message_id,
            one_job_id_through_delay_retry_dead_letter,
            batch_push,
            pause_and_resume_listener,
            job_store_finds_cancels_and_promotes,
            job_store_sees_ready_and_retrying_jobs,
            cancel_never_races_delivery,
            reschedule_moves_a_due_time,
            unique_key_admits_one_job,
            pause_stops_every_listener_of_a_topic,
            cron_skips_overlapping_runs,
            rate_limit_holds_across_clients,
            rate_limit_by_key_keeps_quiet_keys_prompt,
            global_concurrency_holds_across_clients,
            high_jobs_overtake_a_backlog_without_starving_it,
            priority_survives_delay_and_retry,
            presence_shows_live_listeners,
            health_reports_the_server,
        );
    };
    (@cases ($broker:expr); $($case:ident,)*) => {
        mod behaviour {
            #[allow(unused_imports)]
            use super::*;

            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    $crate::run($broker, $crate::cases::$case).await;
                }
            )*
        }
    };
}
