//! Batch push: every `ADDJOB` of a batch goes to the topic's affinity node
//! in one write on its shared connection ([`Node::query_many`](crate::node::Node::query_many), the
//! commands written in place by [`PackedAddJobs`]), and the
//! replies come back in order — one round trip and one timer for the
//! batch instead of one per job.
//!
//! A job whose `ADDJOB` failed without possibly running (the node refused
//! it, the connection was not there) is pushed again alone, through the
//! single push's failover ([`DisqueBackend::add`]); one that may have run
//! (a timeout, a connection lost after the write) is
//! [`Error::OutcomeUnknown`](ezmq_core::Error::OutcomeUnknown), as for a
//! single push.

use bytes::Bytes;
use ezmq_core::{JobId, PushOptions, Result, Topic};

use crate::addjob::PackedAddJobs;
use crate::backend::{affinity_order, DisqueBackend};
use crate::commands::{into_string, map_add_error, unexpected};
use crate::error::DisqueError;
use crate::push_options::DisquePushOptions;

impl DisqueBackend {
    /// Stores a batch of stamped jobs of `topic`: each one's id or error,
    /// in order.
    pub(crate) async fn add_batch(
        &self,
        topic: &Topic,
        jobs: &[(Bytes, PushOptions)],
    ) -> Vec<Result<JobId>> {
        if self.ensure_open().is_err() {
            return jobs
                .iter()
                .map(|_| Err(ezmq_core::Error::Shutdown))
                .collect();
        }
        let shared = &*self.shared;
        let nodes = shared.snapshot();
        let node_count = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
        let order = affinity_order(nodes, topic);
        let body_len = jobs.first().map_or(0, |(body, _)| body.len());
        let mut packed = PackedAddJobs::with_capacity(jobs.len(), body_len);
        for (body, options) in jobs {
            packed.push(&shared.config, node_count, topic, body, options);
        }
        let invalid = jobs.iter().any(|(_, options)| {
            options
                .backend_options::<DisquePushOptions>()
                .is_some_and(|d| d.validate().is_err())
        });
        let sent = match order.first() {
            Some(first) if !invalid => {
                let timeout = packed
                    .longest_timeout()
                    .saturating_add(shared.config.command_timeout);
                first
                    .query_many("ADDJOB", packed.bytes(), packed.count(), timeout)
                    .await
            }
            _ => None,
        };
        let replies = match sent {
            Some(Ok(replies)) => replies,
            Some(Err(err)) if err.may_have_run() => {
                let err = std::sync::Arc::new(err);
                return jobs
                    .iter()
                    .map(|_| {
                        Err(map_add_error(
                            topic,
                            DisqueError::OutcomeUnknown(Box::new(DisqueError::Shared(
                                std::sync::Arc::clone(&err),
                            ))),
                        ))
                    })
                    .collect();
            }
            // Nothing sent (no connection open, the connection refused the
            // batch, an invalid option): one by one, with failover.
            _ => return self.add_each(topic, jobs).await,
        };
        let mut results = Vec::with_capacity(jobs.len());
        for ((body, options), reply) in jobs.iter().zip(replies) {
            let result = match reply {
                Ok(value) => match into_string(value) {
                    Ok(disque_id) => Ok(job_id(options, disque_id)),
                    Err(value) => {
                        let node = order.first().map(|n| &**n);
                        Err(match node {
                            Some(node) => unexpected("ADDJOB", node, &value).into(),
                            None => DisqueError::NoNodes.into(),
                        })
                    }
                },
                Err(err) if err.may_have_run() => Err(map_add_error(
                    topic,
                    DisqueError::OutcomeUnknown(Box::new(err)),
                )),
                // Refused or not sent: the single push decides (failover,
                // or the same refusal, classified).
                Err(_) => self.publish_one(topic, body, options).await,
            };
            results.push(result);
        }
        results
    }

    /// Every job through the single push, concurrently.
    async fn add_each(&self, topic: &Topic, jobs: &[(Bytes, PushOptions)]) -> Vec<Result<JobId>> {
        let sends = jobs
            .iter()
            .map(|(body, options)| self.publish_one(topic, body, options));
        futures::future::join_all(sends).await
    }

    /// One job as [`Backend::publish`](ezmq_core::spi::Backend::publish)
    /// stores it.
    async fn publish_one(
        &self,
        topic: &Topic,
        body: &Bytes,
        options: &PushOptions,
    ) -> Result<JobId> {
        ezmq_core::spi::Backend::publish(self, topic, body.clone(), options).await
    }
}

/// The id a stored job is known by: its ezmq id, else Disque's.
fn job_id(options: &PushOptions, disque_id: String) -> JobId {
    options
        .stamped_id()
        .unwrap_or_else(|| JobId::new(disque_id))
}
