//! The one producer pipeline. Every push goes through it — a plain or
//! delayed push, a batch, a broadcast, a dead letter, a requeue, a
//! request — in this order:
//!
//! 1. **validate**: an open client, the payload limit, options that can
//!    work, the capabilities they need
//!    ([`Runtime::check_push`](crate::spi::Runtime::check_push));
//! 2. **stamp**: the job's id and [`JobMeta`] headers
//!    ([`JobMeta::stamp`]);
//! 3. **unique key**: a push with one claims it under its id
//!    ([`unique`]); a duplicate stops here;
//! 4. **priority**: the job goes to its topic's lane
//!    ([`Priority`]; the topic itself for `Normal`);
//! 5. **trace context, `send` span, metrics** ([`telemetry`]);
//! 6. **the backend**: [`Backend::publish`], [`Backend::publish_batch`] or
//!    [`FanOut::publish_to_groups`].

use std::collections::HashMap;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::job::JobId;
use crate::job_meta::JobMeta;
use crate::priority::Priority;
use crate::push_options::PushOptions;
use crate::spi::{Backend, FanOut};
use crate::telemetry::{self, Telemetry};
use crate::topic::Topic;
use crate::unique;

/// Stamps and publishes one validated push; the job's id.
pub(crate) async fn publish(
    telemetry: &Telemetry,
    backend: &dyn Backend,
    topic: &Topic,
    body: Bytes,
    mut options: PushOptions,
) -> Result<JobId> {
    let prepared = prepare(backend, topic, &mut options).await?;
    let sent = telemetry::publish(
        telemetry,
        backend,
        topic,
        &prepared.queue,
        body,
        &options,
        &prepared.id,
    )
    .await;
    prepared.settle(backend, sent).await
}

/// [`publish`] with `store` as the last step in place of
/// [`Backend::publish`] (a backend's own push path, such as a push in the
/// caller's database transaction): `store` gets the queue (the topic or
/// its lane), the body and the stamped options with the trace context.
pub(crate) async fn publish_with<F, Fut>(
    telemetry: &Telemetry,
    backend: &dyn Backend,
    topic: &Topic,
    body: Bytes,
    mut options: PushOptions,
    store: F,
) -> Result<JobId>
where
    F: FnOnce(Topic, Bytes, PushOptions) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let prepared = prepare(backend, topic, &mut options).await?;
    let queue = prepared.queue.clone();
    let sent = telemetry::publish_with(
        telemetry,
        backend.name(),
        topic,
        &options,
        &prepared.id,
        |options| store(queue, body, options),
    )
    .await;
    prepared.settle(backend, sent).await
}

/// A single push between its stamp and its send: steps 2 to 4.
struct Prepared {
    /// The topic, or its lane.
    queue: Topic,
    /// The job's id, stamped in its options.
    id: JobId,
    /// The unique key the push claimed, if it has one.
    held: Option<unique::HeldKey>,
}

/// Stamps `options`, claims its unique key (a duplicate stops here) and
/// picks the queue.
async fn prepare(
    backend: &dyn Backend,
    topic: &Topic,
    options: &mut PushOptions,
) -> Result<Prepared> {
    let queue = options.priority.lane(topic)?;
    let id = JobMeta::stamp(options);
    let held = match &options.unique {
        Some(unique) => Some(unique::claim(backend, topic, unique, &id).await?),
        None => None,
    };
    Ok(Prepared { queue, id, held })
}

impl Prepared {
    /// The job's id once `sent`; a push the broker refused gives its
    /// unique key back (no job holds it), one whose outcome is unknown
    /// keeps it (the job may be stored).
    async fn settle(self, backend: &dyn Backend, sent: Result<()>) -> Result<JobId> {
        if let (Err(err), Some(held)) = (&sent, self.held) {
            if !err.is_outcome_unknown() {
                held.give_back(backend).await;
            }
        }
        sent.map(|()| self.id)
    }
}

/// Stamps and publishes a validated batch; each job's id or error, in
/// order.
pub(crate) async fn publish_batch(
    telemetry: &Telemetry,
    backend: &dyn Backend,
    topic: &Topic,
    jobs: Vec<(Bytes, PushOptions)>,
) -> Vec<Result<JobId>> {
    let now = std::time::SystemTime::now();
    let mut stamped = jobs;
    let ids: Vec<JobId> = stamped
        .iter_mut()
        .map(|(_, options)| JobMeta::stamp_at(options, now))
        .collect();
    if stamped.iter().all(|(_, options)| options.unique.is_none()) {
        let sent = send_batch(telemetry, backend, topic, stamped).await;
        return ids
            .into_iter()
            .zip(sent)
            .map(|(id, sent)| sent.map(|_| id))
            .collect();
    }
    publish_unique_batch(telemetry, backend, topic, ids, stamped).await
}

/// A batch with unique keys: the keys are claimed together, the jobs that
/// won theirs (and those without a key) are sent as one batch, and the
/// keys of jobs the broker refused are given back. Within the batch the
/// first job of a key claims it; a later job with the same key is a
/// duplicate of whatever that claim found (the first job itself when it
/// won), so the job stored for a key is its first in the batch.
async fn publish_unique_batch(
    telemetry: &Telemetry,
    backend: &dyn Backend,
    topic: &Topic,
    ids: Vec<JobId>,
    stamped: Vec<(Bytes, PushOptions)>,
) -> Vec<Result<JobId>> {
    // For each job, the index of the batch's first job with its key when
    // that is an earlier one.
    let mut first_of_key: HashMap<&str, usize> = HashMap::new();
    let earlier: Vec<Option<usize>> = stamped
        .iter()
        .enumerate()
        .map(|(i, (_, options))| {
            let key = options.unique.as_ref()?.key();
            match first_of_key.get(key) {
                Some(&first) => Some(first),
                None => {
                    first_of_key.insert(key, i);
                    None
                }
            }
        })
        .collect();
    let claims =
        stamped
            .iter()
            .zip(&ids)
            .zip(&earlier)
            .map(|(((_, options), id), earlier)| async move {
                match (&options.unique, earlier) {
                    (Some(unique), None) => {
                        unique::claim(backend, topic, unique, id).await.map(Some)
                    }
                    _ => Ok(None),
                }
            });
    let mut claimed = futures::future::join_all(claims).await;
    for (i, first) in earlier.iter().enumerate() {
        let Some(first) = *first else { continue };
        let Some(unique) = stamped.get(i).and_then(|(_, o)| o.unique.as_ref()) else {
            continue;
        };
        let outcome = match claimed.get(first) {
            Some(Ok(_)) => Err(unique::duplicate(topic, unique, ids.get(first).cloned())),
            Some(Err(Error::Duplicate { existing, .. })) => {
                Err(unique::duplicate(topic, unique, existing.clone()))
            }
            // The first one's claim failed otherwise: this one tries its
            // own.
            _ => match ids.get(i) {
                Some(id) => unique::claim(backend, topic, unique, id).await.map(Some),
                None => continue,
            },
        };
        if let Some(slot) = claimed.get_mut(i) {
            *slot = outcome;
        }
    }
    let sending = stamped
        .into_iter()
        .zip(&claimed)
        .filter(|(_, claim)| claim.is_ok())
        .map(|(job, _)| job)
        .collect();
    let mut sent = send_batch(telemetry, backend, topic, sending)
        .await
        .into_iter();
    let mut results = Vec::with_capacity(ids.len());
    for (id, claim) in ids.into_iter().zip(claimed) {
        let key = match claim {
            Ok(key) => key,
            Err(err) => {
                results.push(Err(err));
                continue;
            }
        };
        // One answer per job sent (the backend's contract).
        let outcome = sent.next().unwrap_or_else(|| {
            Err(Error::backend(
                "the backend answered fewer jobs than it was sent",
                false,
            ))
        });
        if let (Err(err), Some(key)) = (&outcome, key) {
            if !err.is_outcome_unknown() {
                key.give_back(backend).await;
            }
        }
        results.push(outcome.map(|_| id));
    }
    results
}

/// One lane's part of a batch: each job's index in the batch, and the job.
type LaneBatch = (Vec<usize>, Vec<(Bytes, PushOptions)>);

/// Sends stamped jobs of `topic`, each to its priority's lane: one
/// backend batch per lane, the lanes' batches at once; each job's id or
/// error, in order.
async fn send_batch(
    telemetry: &Telemetry,
    backend: &dyn Backend,
    topic: &Topic,
    jobs: Vec<(Bytes, PushOptions)>,
) -> Vec<Result<JobId>> {
    let first = jobs.first().map_or(Priority::Normal, |(_, o)| o.priority);
    if jobs.iter().all(|(_, options)| options.priority == first) {
        return match first.lane(topic) {
            Ok(queue) => telemetry::publish_batch(telemetry, backend, topic, &queue, jobs).await,
            Err(err) => refuse_all(&jobs, &err),
        };
    }
    let count = jobs.len();
    let mut by_lane: [LaneBatch; 3] = Default::default();
    for (index, job) in jobs.into_iter().enumerate() {
        let lane = &mut by_lane[job.1.priority.index()];
        lane.0.push(index);
        lane.1.push(job);
    }
    let sends = Priority::ALL
        .into_iter()
        .zip(by_lane)
        .filter(|(_, (indices, _))| !indices.is_empty())
        .map(|(priority, (indices, jobs))| async move {
            let sent = match priority.lane(topic) {
                Ok(queue) => {
                    telemetry::publish_batch(telemetry, backend, topic, &queue, jobs).await
                }
                Err(err) => refuse_all(&jobs, &err),
            };
            indices.into_iter().zip(sent)
        });
    let mut results: Vec<Option<Result<JobId>>> = (0..count).map(|_| None).collect();
    for (index, result) in futures::future::join_all(sends).await.into_iter().flatten() {
        if let Some(slot) = results.get_mut(index) {
            *slot = Some(result);
        }
    }
    results
        .into_iter()
        .map(|result| {
            result.unwrap_or_else(|| {
                Err(Error::backend(
                    "the backend answered fewer jobs than it was sent",
                    false,
                ))
            })
        })
        .collect()
}

/// The same refusal for every job of a batch whose lane has no name.
fn refuse_all(jobs: &[(Bytes, PushOptions)], err: &Error) -> Vec<Result<JobId>> {
    let reason = err.to_string();
    jobs.iter()
        .map(|_| Err(Error::invalid_option("priority", reason.clone())))
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
    if options.unique.is_some() {
        return Err(Error::invalid_option(
            "unique_key",
            "a broadcast cannot be unique: unique keys are for queued jobs",
        ));
    }
    let id = JobMeta::stamp(&mut options);
    telemetry::publish_to_groups(telemetry, system, fan_out, topic, body, &options, &id).await
}
