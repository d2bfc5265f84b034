//! The SPI implementation: [`Backend`] and the capability traits over the
//! Disque commands of [`DisqueBackend`].

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{
    envelope, Backend, Capabilities, Capability, Delivery, DeliveryHandle, ExclusiveClaim, FanOut,
    JobStore, Peek, QueueStats, ReplyChannel, Source,
};
use ezmq_core::{BrokerHealth, Job, JobId, PushOptions, Result, Topic, MESSAGE_ID_HEADER};

use crate::backend::DisqueBackend;
use crate::delivery::DisqueDelivery;
use crate::fan_out::group_queue;
use crate::push_options::DisquePushOptions;

/// Delays and leases (`WORKING`); the accessors below hand out
/// `QLEN`/`QPEEK`, `MAXLEN 1` claims, and the fan-out and reply inboxes
/// ezmq builds from queues. No idempotent push: job ids are the node's.
const ABILITIES: Capabilities = Capabilities::none()
    .with(Capability::DelayedDelivery)
    .with(Capability::LeaseExtension)
    .with(Capability::RateLimitByKey);

#[async_trait]
impl Backend for DisqueBackend {
    fn name(&self) -> &'static str {
        "disque"
    }

    fn abilities(&self) -> Capabilities {
        ABILITIES
    }

    /// `ADDJOB` (see [`DisqueBackend`]); the job's headers — its id and
    /// metadata, which core stamped — travel in the body's envelope. A
    /// push without headers (the SPI called directly) is stored as its
    /// bare body, with Disque's job id as its id.
    async fn publish(&self, topic: &Topic, body: Bytes, options: &PushOptions) -> Result<JobId> {
        if let Some(disque) = options.backend_options::<DisquePushOptions>() {
            disque.validate()?;
        }
        if options.headers.is_empty() {
            return self.add(topic, body, options).await;
        }
        let stored = envelope::encode(&options.headers, &body);
        let disque_id = self.add(topic, stored, options).await?;
        Ok(options.stamped_id().unwrap_or(disque_id))
    }

    /// Every `ADDJOB` of the batch in one write to the topic's affinity
    /// node (see `batch.rs`).
    async fn publish_batch(
        &self,
        topic: &Topic,
        jobs: &[(Bytes, PushOptions)],
    ) -> Vec<Result<JobId>> {
        self.add_batch(topic, jobs).await
    }

    /// `GETJOB ... WITHCOUNTERS FROM <queue>` on the queue's affinity node.
    async fn receive(&self, source: &Source, max: usize, wait: Duration) -> Result<Vec<Delivery>> {
        let queue = match source {
            Source::Topic(topic) => topic.clone(),
            Source::Group { topic, group } => group_queue(topic, group)?,
            other => {
                return Err(ezmq_core::Error::invalid_option(
                    "source",
                    format!("the disque backend cannot receive from {other}"),
                ))
            }
        };
        let jobs = self.fetch(&queue, max, wait).await?;
        Ok(jobs
            .into_iter()
            .map(|job| self.delivery(source.topic(), &queue, job))
            .collect())
    }

    /// One `ACKJOB id1 id2 ...` per delivering node.
    async fn ack_batch(&self, handles: &[DeliveryHandle]) -> Result<()> {
        let mut ids = Vec::with_capacity(handles.len());
        for handle in handles {
            match handle.downcast_ref::<DisqueDelivery>() {
                Some(delivery) => ids.push(delivery.id.clone()),
                None => handle.ack().await?,
            }
        }
        self.ack_many(&ids).await
    }

    async fn close(&self) -> Result<()> {
        self.close_connections().await
    }

    /// `INFO` on every node of the table (see `health_report.rs`).
    async fn health(&self) -> Result<BrokerHealth> {
        self.health_report().await
    }

    fn queue_stats(&self) -> Option<&dyn QueueStats> {
        Some(self)
    }

    fn peek(&self) -> Option<&dyn Peek> {
        Some(self)
    }

    fn exclusive_claim(&self) -> Option<&dyn ExclusiveClaim> {
        Some(self)
    }

    fn fan_out(&self) -> Option<&dyn FanOut> {
        Some(self)
    }

    fn reply_channel(&self) -> Option<&dyn ReplyChannel> {
        Some(self)
    }

    /// Jobs by id and state from `JSCAN` on every node (see the crate
    /// README's "Job store").
    fn job_store(&self) -> Option<&dyn JobStore> {
        Some(self)
    }
}

impl DisqueBackend {
    /// A job as fetched (raw body, Disque id, counters) turned into what
    /// the handler sees and the handle that settles it.
    fn delivery(&self, topic: &Topic, queue: &Topic, job: Job) -> Delivery {
        let disque_id = job.id().clone();
        let (job, headers, body) = decode(topic, job);
        let attempt = job.attempt();
        Delivery::new(
            job,
            DisqueDelivery {
                backend: self.clone(),
                id: disque_id,
                queue: queue.clone(),
                headers,
                body,
                attempt,
            },
        )
    }
}

/// Splits the envelope off a fetched job: the handler's job (message id,
/// user topic, headers, attempt = the header's attempt plus Disque's
/// counters), and the headers and body a retry re-adds.
fn decode(topic: &Topic, raw: Job) -> (Job, ezmq_core::Headers, Bytes) {
    let counted_retries = raw.attempt().saturating_sub(1);
    let disque_id = raw.id().clone();
    let (headers, body) = envelope::decode(raw.into_body());
    let base = headers.attempt().unwrap_or(1);
    let id = headers.get(MESSAGE_ID_HEADER).map_or(disque_id, JobId::new);
    let job = Job::new(id, topic.clone(), body.clone())
        .with_headers(headers.clone())
        .with_attempt(base.saturating_add(counted_retries));
    (job, headers, body)
}

#[async_trait]
impl QueueStats for DisqueBackend {
    /// The sum of `QLEN` over every node.
    async fn queue_len(&self, topic: &Topic) -> Result<u64> {
        self.queue_length(topic).await
    }

    /// The queues of every node (`QSCAN`): those holding jobs (Disque drops
    /// a queue some time after it empties).
    async fn topics(&self) -> Result<Option<Vec<Topic>>> {
        let names = self.queue_names().await?;
        Ok(Some(
            names
                .into_iter()
                .filter_map(|name| Topic::new(name).ok())
                .collect(),
        ))
    }
}

#[async_trait]
impl Peek for DisqueBackend {
    /// `QPEEK` on every node, merged.
    async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>> {
        let jobs = self.peek_jobs(topic, n).await?;
        Ok(jobs.into_iter().map(|job| decode(topic, job).0).collect())
    }
}
