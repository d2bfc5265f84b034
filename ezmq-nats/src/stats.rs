//! Queue stats and peek: the topic consumer's counts, and the stream's
//! messages after the consumer's last delivery, read without taking them.

use async_nats::jetstream::stream::{InfoError, RawMessageErrorKind};
use async_trait::async_trait;
use ezmq_core::spi::{envelope, Peek, QueueStats, Source};
use ezmq_core::{Job, JobId, Result, Topic, MESSAGE_ID_HEADER};
use futures::TryStreamExt;

use crate::backend::NatsBackend;

#[async_trait]
impl QueueStats for NatsBackend {
    /// Jobs of the topic its consumer has not delivered yet (delayed jobs
    /// not yet due are in the delayed stream and not counted).
    async fn queue_len(&self, topic: &Topic) -> Result<u64> {
        let inner = &self.inner;
        let consumer = inner.consumer(&Source::Topic(topic.clone())).await?;
        let info = inner.timed("queue length", consumer.get_info()).await?;
        Ok(info.num_pending)
    }

    /// Jobs delivered and not yet settled (running, or handed back with a
    /// retry delay).
    async fn in_flight(&self, topic: &Topic) -> Result<Option<u64>> {
        let inner = &self.inner;
        let consumer = inner.consumer(&Source::Topic(topic.clone())).await?;
        let info = inner.timed("queue length", consumer.get_info()).await?;
        Ok(Some(
            u64::try_from(info.num_ack_pending).unwrap_or(u64::MAX),
        ))
    }

    /// The topics with messages in the jobs stream (its subjects, read
    /// from the stream's info).
    async fn topics(&self) -> Result<Option<Vec<Topic>>> {
        let inner = &self.inner;
        let subjects = inner
            .timed("topics", async {
                let mut info = inner
                    .jobs
                    .info_with_subjects(inner.names.jobs_subjects())
                    .await?;
                let mut subjects = Vec::new();
                while let Some((subject, _count)) = info.try_next().await? {
                    subjects.push(subject);
                }
                Ok::<_, InfoError>(subjects)
            })
            .await?;
        let mut topics: Vec<Topic> = subjects
            .iter()
            .filter_map(|subject| inner.names.queue_of_job(subject))
            .filter_map(|queue| Topic::new(queue).ok())
            .collect();
        topics.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        Ok(Some(topics))
    }
}

#[async_trait]
impl Peek for NatsBackend {
    /// The first `n` jobs after the consumer's last delivery, in stream
    /// order, each read by sequence (one request per job).
    async fn peek(&self, topic: &Topic, n: usize) -> Result<Vec<Job>> {
        let inner = &self.inner;
        let consumer = inner.consumer(&Source::Topic(topic.clone())).await?;
        let info = inner.timed("peek", consumer.get_info()).await?;
        let subject = inner.names.job_subject(topic.as_str());
        let mut next = info.delivered.stream_sequence + 1;
        let mut jobs = Vec::new();
        while jobs.len() < n {
            let got = inner
                .timed("peek", async {
                    match inner
                        .jobs
                        .raw_message_builder()
                        .sequence(next)
                        .next_by_subject(subject.clone())
                        .send()
                        .await
                    {
                        Ok(message) => Ok(Some(message)),
                        Err(err) if matches!(err.kind(), RawMessageErrorKind::NoMessageFound) => {
                            Ok(None)
                        }
                        Err(err) => Err(err),
                    }
                })
                .await?;
            let Some(message) = got else { break };
            next = message.sequence + 1;
            let (headers, body) = envelope::decode(message.payload);
            let id = headers.get(MESSAGE_ID_HEADER).map_or_else(
                || JobId::new(format!("nats-{}", message.sequence)),
                JobId::new,
            );
            let attempt = headers.attempt().unwrap_or(1).max(1);
            jobs.push(
                Job::new(id, topic.clone(), body)
                    .with_headers(headers)
                    .with_attempt(attempt),
            );
        }
        Ok(jobs)
    }
}
