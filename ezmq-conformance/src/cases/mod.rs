//! The cases. Each is an `async fn(Ctx)` that [`run`](crate::run) calls
//! with a first connected client; each uses its own topics and shuts its
//! clients down at the end. Capability-gated cases check that the missing
//! feature fails with [`Error::Unsupported`](ezmq_core::Error::Unsupported)
//! at registration, print `skipped: <backend> lacks <capability>: <case>`
//! and return.

mod consume;
mod failures;
mod global_concurrency;
mod health;
mod idempotence;
mod inspection;
mod job_control;
mod job_model;
mod lifecycle;
mod presence;
mod priorities;
mod rate_limit;
mod rate_limit_by_key;
mod timing;
mod topic_pause;
mod unique_jobs;

#[cfg(feature = "features")]
mod broadcast;
#[cfg(feature = "features")]
mod cron;
#[cfg(feature = "features")]
mod cron_overlap;
#[cfg(feature = "features")]
mod request_reply;

pub use consume::{
    concurrency_limit_respected, headers_round_trip, payload_and_topic_limits, push_consume,
};
pub use failures::{
    at_least_once_when_consumer_dies, permanent_error_skips_retries,
    retry_with_backoff_then_dead_letter,
};
pub use global_concurrency::global_concurrency_holds_across_clients;
pub use health::health_reports_the_server;
pub use idempotence::idempotent_push_by_message_id;
pub use inspection::{capabilities_are_consistent, peek, queue_len};
pub use job_control::{
    cancel_never_races_delivery, job_store_sees_ready_and_retrying_jobs,
    reschedule_moves_a_due_time,
};
pub use job_model::{
    batch_push, job_store_finds_cancels_and_promotes, one_job_id_through_delay_retry_dead_letter,
    pause_and_resume_listener,
};
pub use lifecycle::{graceful_shutdown_loses_nothing, resumes_after_broker_restart};
pub use presence::presence_shows_live_listeners;
pub use priorities::{
    high_jobs_overtake_a_backlog_without_starving_it, priority_survives_delay_and_retry,
};
pub use rate_limit::rate_limit_holds_across_clients;
pub use rate_limit_by_key::rate_limit_by_key_keeps_quiet_keys_prompt;
pub use timing::{delayed_delivery_never_early, long_handler_gets_no_duplicate};
pub use topic_pause::pause_stops_every_listener_of_a_topic;
pub use unique_jobs::unique_key_admits_one_job;

#[cfg(feature = "features")]
pub use broadcast::broadcast_groups;
#[cfg(feature = "features")]
pub use cron::cron_once_per_tick;
#[cfg(feature = "features")]
pub use cron_overlap::cron_skips_overlapping_runs;
#[cfg(feature = "features")]
pub use request_reply::request_reply;

#[cfg(not(feature = "features"))]
mod without_features {
    use crate::Ctx;

    async fn skip(ctx: Ctx) {
        ctx.skip_because("(ezmq-conformance built without its `features` feature)");
        crate::support::shutdown(ctx.client(), std::time::Duration::from_secs(5)).await;
    }

    /// Stands in for the cron case when the crate is built without its
    /// `features` feature: prints a skip line.
    pub async fn cron_once_per_tick(ctx: Ctx) {
        skip(ctx).await;
    }

    /// Stands in for the cron overlap case (see [`cron_once_per_tick`]).
    pub async fn cron_skips_overlapping_runs(ctx: Ctx) {
        skip(ctx).await;
    }

    /// Stands in for the broadcast case (see [`cron_once_per_tick`]).
    pub async fn broadcast_groups(ctx: Ctx) {
        skip(ctx).await;
    }

    /// Stands in for the request-reply case (see [`cron_once_per_tick`]).
    pub async fn request_reply(ctx: Ctx) {
        skip(ctx).await;
    }
}

#[cfg(not(feature = "features"))]
pub use without_features::{
    broadcast_groups, cron_once_per_tick, cron_skips_overlapping_runs, request_reply,
};
