//! NATS JetStream: raw `async-nats` loops on ezmq's own stream and
//! subjects (a JetStream publish awaited for its acknowledgement; a
//! durable pull consumer fetched in batches, each message acknowledged)
//! against `ezmq-nats`, with the default prefix `ezmq`.

mod batch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::{pull, AckPolicy, PullConsumer};
use async_nats::jetstream::{self, stream::Stream};
use ezmq_core::{Client, MqClient};
use ezmq_nats::NatsBackend;
use futures::StreamExt;
use tokio::task::JoinHandle;

use crate::brokers::{RawBroker, RawNotes, Sender};
use crate::scenario::latency::Recorder;
use crate::BoxResult;

/// The default URL (`EZMQ_TEST_NATS_URL` overrides it).
pub(crate) const DEFAULT_URL: &str = "nats://127.0.0.1:4222";
/// The longest the raw receiver's pull waits for a message.
const PULL_WAIT: Duration = Duration::from_millis(100);

/// A NATS server, a raw JetStream context on it, and an ezmq client that
/// made ezmq's streams (and names their subjects).
pub(crate) struct NatsBench {
    url: String,
    js: jetstream::Context,
    jobs: Stream,
    names: Client,
}

impl NatsBench {
    /// Connects to `url` and makes sure ezmq's streams are there (an ezmq
    /// client creates them).
    pub(crate) async fn connect(url: &str) -> BoxResult<Self> {
        let names = tokio::time::timeout(Duration::from_secs(3), ezmq_nats::connect_url(url))
            .await
            .map_err(|_| format!("no answer from {url}"))??;
        let client = async_nats::connect(url.trim_start_matches("nats://")).await?;
        let js = jetstream::new(client);
        let stream_name = backend(&names)?.jobs_stream().to_owned();
        let jobs = js.get_stream(stream_name).await?;
        Ok(NatsBench {
            url: url.to_owned(),
            js,
            jobs,
            names,
        })
    }

    /// The subject ezmq stores `queue`'s jobs under.
    fn subject(&self, queue: &str) -> BoxResult<String> {
        Ok(backend(&self.names)?.job_subject(queue))
    }

    /// The raw side's durable consumer of `queue`.
    async fn raw_consumer(&self, queue: &str) -> BoxResult<PullConsumer> {
        let name = format!("raw_{}", uuid::Uuid::new_v4().simple());
        Ok(self
            .jobs
            .create_consumer(pull::Config {
                durable_name: Some(name),
                filter_subject: self.subject(queue)?,
                ack_policy: AckPolicy::Explicit,
                max_ack_pending: -1,
                ..Default::default()
            })
            .await?)
    }
}

fn backend(client: &Client) -> BoxResult<&NatsBackend> {
    client
        .runtime()
        .backend_as::<NatsBackend>()
        .ok_or_else(|| "the ezmq client is not on NATS".into())
}

/// Up to `k` messages that are there now, or else the first that comes
/// within `wait` and those there with it.
async fn pull(
    consumer: &PullConsumer,
    k: usize,
    wait: Option<Duration>,
) -> BoxResult<Vec<jetstream::Message>> {
    let mut got = Vec::with_capacity(k);
    let mut batch = consumer.fetch().max_messages(k).messages().await?;
    while let Some(message) = batch.next().await {
        got.push(message?);
    }
    if got.is_empty() {
        if let Some(wait) = wait {
            let mut one = consumer
                .batch()
                .max_messages(1)
                .expires(wait)
                .messages()
                .await?;
            while let Some(message) = one.next().await {
                got.push(message?);
            }
        }
    }
    Ok(got)
}

impl RawBroker for NatsBench {
    fn name(&self) -> &'static str {
        "NATS"
    }

    fn p99_goal(&self) -> Duration {
        Duration::from_millis(2)
    }

    fn latency_goal_rate(&self) -> u64 {
        1_000
    }

    fn raw_notes(&self) -> RawNotes {
        RawNotes {
            push_col: "raw JetStream publish",
            consume_col: "raw pull fetch+ack loop",
            push:
                "one `async-nats` connection shared by the tasks, a JetStream publish of the \
                   body to ezmq's subject of the queue in `ezmq_jobs`, its acknowledgement awaited.",
            consume:
                "one loop on a durable pull consumer of the queue's subject: a fetch of up to \
                      64 messages, each acknowledged (`+ACK`), then the next fetch; timed until \
                      the last message.",
            latency: "one loop: a fetch of what is there, else a pull waiting up to 100 ms for \
                      one message; latency taken when the message arrives, then acknowledged.",
        }
    }

    async fn ezmq(&self) -> BoxResult<Client> {
        Ok(ezmq_nats::connect_url(&self.url).await?)
    }

    async fn raw_sender(&self, queue: &str) -> BoxResult<Sender> {
        let (js, subject) = (self.js.clone(), self.subject(queue)?);
        Ok(Arc::new(move |body| {
            let (js, subject) = (js.clone(), subject.clone());
            Box::pin(async move {
                js.publish(subject, body).await?.await?;
                Ok(())
            })
        }))
    }

    async fn raw_consume(&self, queue: &str, n: u64, k: usize) -> BoxResult<Duration> {
        let consumer = self.raw_consumer(queue).await?;
        let start = Instant::now();
        let mut got = 0u64;
        while got < n {
            if start.elapsed() > super::DRAIN_LIMIT {
                return Err(
                    format!("raw consume: only {got} of {n} in {:?}", super::DRAIN_LIMIT).into(),
                );
            }
            for message in pull(&consumer, k, Some(PULL_WAIT)).await? {
                message.ack().await?;
                got += 1;
            }
        }
        let took = start.elapsed();
        self.jobs
            .delete_consumer(&consumer.cached_info().name)
            .await?;
        Ok(took)
    }

    async fn raw_receiver(
        &self,
        queue: &str,
        k: usize,
        rec: Arc<Recorder>,
        stop: Arc<AtomicBool>,
    ) -> BoxResult<JoinHandle<BoxResult<()>>> {
        let consumer = self.raw_consumer(queue).await?;
        let jobs = self.jobs.clone();
        Ok(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                for message in pull(&consumer, k, Some(PULL_WAIT)).await? {
                    rec.record(&message.payload);
                    message.ack().await?;
                }
            }
            jobs.delete_consumer(&consumer.cached_info().name).await?;
            Ok(())
        }))
    }

    async fn cleanup(&self, queue: &str) -> BoxResult<()> {
        self.jobs.purge().filter(self.subject(queue)?).await?;
        Ok(())
    }
}
