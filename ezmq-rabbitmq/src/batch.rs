//! Batch publishing: every job of a batch sent on the confirm channel,
//! then one wait for all their confirms.

use bytes::Bytes;
use ezmq_core::{JobId, PushOptions, Result, Topic};

use crate::backend::Inner;
use crate::error::RabbitError;
use crate::publish::{self, Outgoing, Sent};

/// What became of one job of the batch on the shared pass.
enum Outcome {
    /// Handed to the connection; its confirm is awaited with the others'.
    Sent(Sent),
    /// Failed before it left, on a live connection: the job's error.
    Failed(RabbitError),
    /// Not sent because the connection died: sent again alone
    /// ([`publish::send`], which reconnects).
    Resend,
}

/// Publishes `jobs` to `topic`'s queue: each one is declared-for and sent
/// on the publisher-confirm channel in order (immediate and delayed alike,
/// the delayed ones into their delay level), then all the confirms are
/// awaited together, within one operation timeout from the last send.
/// Each job's id (the one core stamped, [`publish::push_id`]) or error, in
/// order.
///
/// What one publish does on its own happens per job here too: a nacked
/// job (not stored) is sent again alone through [`publish::send`] (which
/// absorbs nacks), so is one that never left because the connection died;
/// a job whose confirm never came is [`ezmq_core::Error::OutcomeUnknown`].
pub(crate) async fn send(
    inner: &Inner,
    topic: &Topic,
    jobs: &[(Bytes, PushOptions)],
) -> Vec<Result<JobId>> {
    let queue = inner.names.topic_queue(topic);
    let ids: Vec<JobId> = jobs
        .iter()
        .map(|(_, options)| publish::push_id(options))
        .collect();
    let outs: Vec<Outgoing<'_>> = jobs
        .iter()
        .zip(&ids)
        .map(|((body, options), id)| Outgoing {
            topic: topic.as_str(),
            queue: &queue,
            body,
            headers: &options.headers,
            message_id: id.as_str(),
            delay: options.delay.filter(|d| !d.is_zero()),
            ttl: options.ttl,
            declare: true,
        })
        .collect();

    let outcomes = match inner.connector.session().await {
        Ok(session) => {
            let mut outcomes = Vec::with_capacity(outs.len());
            for out in &outs {
                if outcomes
                    .last()
                    .is_some_and(|o| matches!(o, Outcome::Resend))
                {
                    // The connection is gone: the rest go alone too.
                    outcomes.push(Outcome::Resend);
                    continue;
                }
                // Each send has an operation timeout of its own (a first
                // delayed job declares the delay levels).
                let deadline = tokio::time::Instant::now() + session.timeout();
                outcomes.push(match start(inner, &session, out, deadline).await {
                    Ok(sent) => Outcome::Sent(sent),
                    // It may have left: never sent twice.
                    Err(err @ RabbitError::Unconfirmed { .. }) => Outcome::Failed(err),
                    Err(_) if !session.is_alive() => Outcome::Resend,
                    Err(err) => Outcome::Failed(err),
                });
            }
            // The one confirm wait of the batch: one operation timeout
            // from the last send.
            let deadline = tokio::time::Instant::now() + session.timeout();
            let confirmed = futures::future::join_all(outcomes.into_iter().map(|o| async move {
                match o {
                    Outcome::Sent(sent) => match sent.confirmed(deadline).await {
                        Ok(()) => Ok(()),
                        Err(RabbitError::Nacked { .. }) => Err(None),
                        Err(err) => Err(Some(err)),
                    },
                    Outcome::Failed(err) => Err(Some(err)),
                    Outcome::Resend => Err(None),
                }
            }))
            .await;
            if !session.is_alive() {
                inner.connector.invalidate(session.generation);
            }
            confirmed
        }
        // No connection now: each job tries on its own (and fails with its
        // own error).
        Err(_) => outs.iter().map(|_| Err(None)).collect(),
    };
    tracing::debug!(topic = %topic, jobs = outs.len(), "batch published");

    // Results, in order; the jobs to send again alone go concurrently
    // (only those: the common batch settles without another future).
    let mut results: Vec<Option<Result<()>>> = Vec::with_capacity(outs.len());
    let mut again = Vec::new();
    for (i, (out, outcome)) in outs.iter().zip(outcomes).enumerate() {
        results.push(match outcome {
            Ok(()) => Some(Ok(())),
            Err(Some(err)) => Some(Err(publish::outcome_unknown(out, err))),
            Err(None) => {
                again.push((i, publish::send(inner, out)));
                None
            }
        });
    }
    if !again.is_empty() {
        let (which, sends): (Vec<usize>, Vec<_>) = again.into_iter().unzip();
        for (i, sent) in which
            .into_iter()
            .zip(futures::future::join_all(sends).await)
        {
            if let Some(slot) = results.get_mut(i) {
                *slot = Some(sent);
            }
        }
    }
    ids.iter()
        .zip(results)
        .map(|(id, sent)| {
            sent.unwrap_or_else(|| {
                Err(ezmq_core::Error::backend(
                    "a job of the batch got no result",
                    false,
                ))
            })
            .map(|()| id.clone())
        })
        .collect()
}

/// Declares for and sends one job without waiting for its confirm.
async fn start(
    inner: &Inner,
    session: &crate::session::Session,
    out: &Outgoing<'_>,
    deadline: tokio::time::Instant,
) -> Result<Sent, RabbitError> {
    let (exchange, properties) = publish::prepare(inner, session, out).await?;
    publish::start(
        session, &exchange, out.queue, out.body, properties, true, deadline,
    )
    .await
}
