//! The one producer pipeline. Every push goes through it — a plain or
//! delayed push, a batch, a broadcast, a dead letter, a requeue, a
//! request — in this order:
//!
//! 1. **validate**: an open client, the payload limit, options that can
//!    work, the capabilities they need
//!    ([`Runtime::check_push`](crate::spi::Runtime::check_push));
//! 2. **stamp**: the job's id and [`JobMeta`] headers
//!    ([`JobMeta::stamp`]);
//! 3. **trace context, `send` span, metrics** ([`telemetry`]);
//! 4. **the backend**: [`Backend::publish`], [`Backend::publish_batch`] or
//!    [`FanOut::publish_to_groups`].
//!
//! What later features add to every push (unique keys, priorities) goes
//! between 2 and 3, once, here.

use bytes::Bytes;

use crate::error::Result;
use crate::job::JobId;
use crate::job_meta::JobMeta;
use crate::push_options::PushOptions;
use crate::spi::{Backend, FanOut};
use crate::telemetry::{self, Telemetry};
use crate::topic::Topic;

/// Stamps and publishes one validated push; the job's id.
pub(crate) async fn publish(
    telemetry: &Telemetry,
    backend: &dyn Backend,
    topic: &Topic,
    body: Bytes,
    mut options: PushOptions,
) -> Result<JobId> {
    let id = JobMeta::stamp(&mut options);
    telemetry::publish(telemetry, backend, topic, body, &options, &id).await?;
    Ok(id)
}

/// Stamps and publishes a validated batch; each job's id or error, in
/// order.
pub(crate) async fn publish_batch(
    telemetry: &Telemetry,
    backend: &dyn Backend,
    topic: &Topic,
    jobs: Vec<(Bytes, PushOptions)>,
) -> Vec<Result<JobId>> {
    let mut ids = Vec::with_capacity(jobs.len());
    let stamped = jobs
        .into_iter()
        .map(|(body, mut options)| {
            ids.push(JobMeta::stamp(&mut options));
            (body, options)
        })
        .collect();
    let sent = telemetry::publish_batch(telemetry, backend, topic, stamped).await;
    ids.into_iter()
        .zip(sent)
        .map(|(id, sent)| sent.map(|_| id))
        .collect()
}

/// Stamps and broadcasts a validated push to every group of `topic`: the
/// number of groups reached, when the broker tells it. Every group's copy
/// carries the same job id.
pub(crate) async fn publish_to_groups(
    telemetry: &Telemetry,
    system: &'static str,
    fan_out: &dyn FanOut,
    topic: &Topic,
    body: Bytes,
    mut options: PushOptions,
) -> Result<Option<usize>> {
    let id = JobMeta::stamp(&mut options);
    telemetry::publish_to_groups(telemetry, system, fan_out, topic, body, &options, &id).await
}
