//! Request-reply: an inbox is a topic of its own, `<prefix>.r.<uuid>`
//! (one partition, replies kept 10 minutes), read by its client with an
//! assigned consumer and deleted when it closes; a reply is a record
//! produced to it, with its expiry as a header.
//!
//! An inbox whose client died is never closed: while its client lives
//! it holds a liveness claim per 5-minute epoch (`__ezmq|inbox|<uuid>|<epoch>`,
//! the current and the next one), and a client opening an inbox deletes
//! the inbox topics whose claims of this epoch and the one before have
//! lapsed.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{ExclusiveClaim, Inbox, ReplyChannel};
use ezmq_core::{Error, Result, Topic};
use futures::FutureExt;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers as _, Message, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::Mutex;

use crate::backend::KafkaBackend;
use crate::background::Background;
use crate::cluster::{kafka_error, KafkaCluster};
use crate::consumer::record::{now_ms, EXPIRES_HEADER};

/// How long an inbox keeps its replies (a reply is useless after its
/// request's timeout anyway).
const REPLY_RETENTION_MS: &str = "600000";

/// The length of a liveness epoch.
const EPOCH: Duration = Duration::from_secs(300);

fn epoch_at(now_ms: u64) -> u64 {
    now_ms / 300_000
}

/// The liveness claim of inbox `id` in `epoch`.
fn alive_key(id: &str, epoch: u64) -> Result<Topic> {
    Topic::internal("inbox", &[id, &epoch.to_string()])
}

/// `<prefix>.r.`: the start of every inbox topic of `prefix`.
fn inbox_start(prefix: &str) -> String {
    format!("{prefix}.r.")
}

/// True when `id` is an inbox id: a simple UUID, 32 lower-case hex digits.
fn is_inbox_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl KafkaBackend {
    /// Deletes the inbox topics whose client is gone (no liveness claim
    /// in this epoch or the one before), but `own`'s. Best effort: a
    /// failure is logged.
    async fn sweep_inboxes(&self, own: &str) {
        let start = inbox_start(&self.config().prefix);
        let topics = match self.cluster().topics_starting_with(&start).await {
            Ok(topics) => topics,
            Err(err) => {
                tracing::debug!(error = %err, "listing reply inboxes failed; none swept");
                return;
            }
        };
        let epoch = epoch_at(now_ms());
        for topic in topics {
            let id = &topic[start.len()..];
            if id == own || !is_inbox_id(id) {
                continue;
            }
            match self.inbox_alive(id, epoch).await {
                Ok(true) => {}
                Ok(false) => match self.cluster().delete_topic(&topic).await {
                    Ok(()) => {
                        tracing::info!(inbox = %topic, "deleted the reply inbox of a client that is gone");
                    }
                    Err(err) => {
                        tracing::debug!(inbox = %topic, error = %err, "deleting a dead reply inbox failed");
                    }
                },
                Err(err) => {
                    tracing::debug!(inbox = %topic, error = %err, "checking a reply inbox failed");
                }
            }
        }
    }

    async fn inbox_alive(&self, id: &str, epoch: u64) -> Result<bool> {
        for e in [epoch, epoch.saturating_sub(1)] {
            if self.holder(&alive_key(id, e)?).await?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Claims inbox `id`'s liveness in `epoch` (held three epochs).
async fn keep_alive(backend: &KafkaBackend, id: &str, epoch: u64) -> Result<()> {
    backend
        .claim(&alive_key(id, epoch)?, id, EPOCH * 3)
        .await
        .map(|_| ())
}

/// Claims the next epoch's liveness every half epoch until stopped.
async fn renew(backend: KafkaBackend, id: String, mut stopped: tokio::sync::watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stopped.changed() => return,
            () = tokio::time::sleep(EPOCH / 2) => {}
        }
        let next = epoch_at(now_ms()) + 1;
        if let Err(err) = keep_alive(&backend, &id, next).await {
            tracing::warn!(inbox = %id, error = %err, "renewing a reply inbox's liveness failed; trying again in half an epoch");
        }
    }
}

#[async_trait]
impl ReplyChannel for KafkaBackend {
    async fn open_inbox(&self) -> Result<Box<dyn Inbox>> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let epoch = epoch_at(now_ms());
        // Alive before the topic exists: no sweep ever sees it unclaimed.
        keep_alive(self, &id, epoch).await?;
        keep_alive(self, &id, epoch + 1).await?;
        self.sweep_inboxes(&id).await;
        let config = self.config();
        let address = crate::names::name(&config.prefix, "r", &[&id]);
        self.cluster()
            .ensure_topic(&address, 1, &[("retention.ms", REPLY_RETENTION_MS)])
            .await?;
        let consumer: StreamConsumer = crate::claims::reader_config(config, &address)
            .create()
            .map_err(|err| kafka_error("open inbox", err))?;
        let mut list = TopicPartitionList::with_capacity(1);
        list.add_partition_offset(&address, 0, Offset::Beginning)
            .and_then(|()| consumer.assign(&list))
            .map_err(|err| kafka_error("open inbox", err))?;
        let renewal = Background::spawn("reply inbox liveness", {
            let (backend, id) = (self.clone(), id.clone());
            move |stopped| renew(backend, id, stopped)
        });
        tracing::debug!(inbox = %address, "reply inbox opened");
        Ok(Box::new(KafkaInbox {
            address,
            consumer: Mutex::new(Some(consumer)),
            cluster: self.cluster().clone(),
            renewal,
            closed: AtomicBool::new(false),
        }))
    }

    async fn send_reply(&self, address: &str, body: Bytes, ttl: Duration) -> Result<()> {
        let id = address.strip_prefix(&inbox_start(&self.config().prefix));
        if !id.is_some_and(is_inbox_id) {
            return Err(Error::InvalidOption {
                option: "reply address",
                reason: format!("{address:?} is not a Kafka reply inbox of this prefix"),
            });
        }
        let expires = now_ms().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        let headers = OwnedHeaders::new_with_capacity(1).insert(Header {
            key: EXPIRES_HEADER,
            value: Some(&expires.to_string()),
        });
        let record = FutureRecord::<(), [u8]>::to(address)
            .payload(&body[..])
            .headers(headers);
        match self.producer().send(record, Duration::ZERO).await {
            Ok(_) => Ok(()),
            Err((err, _)) => Err(reply_failed(address, err)),
        }
    }
}

fn reply_failed(address: &str, err: KafkaError) -> Error {
    match err.rdkafka_error_code() {
        Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
            Error::backend(
                format!("the reply inbox {address:?} is gone (its client closed it or died)"),
                false,
            )
        }
        _ => kafka_error("send reply", err),
    }
}

/// An open inbox: its topic and the consumer assigned it (until closed).
struct KafkaInbox {
    address: String,
    consumer: Mutex<Option<StreamConsumer>>,
    cluster: KafkaCluster,
    renewal: Background,
    closed: AtomicBool,
}

impl fmt::Debug for KafkaInbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaInbox")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// A reply's body, unless it expired.
fn live_body(message: &rdkafka::message::BorrowedMessage<'_>, now: u64) -> Option<Bytes> {
    let expired = message.headers().is_some_and(|headers| {
        headers.iter().any(|h| {
            h.key == EXPIRES_HEADER
                && h.value
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .and_then(|v| v.parse::<u64>().ok())
                    .is_some_and(|at| now >= at)
        })
    });
    (!expired).then(|| Bytes::copy_from_slice(message.payload().unwrap_or_default()))
}

#[async_trait]
impl Inbox for KafkaInbox {
    fn address(&self) -> &str {
        &self.address
    }

    /// Cancel-safe: once the first reply is taken, the rest are taken
    /// without waiting.
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Bytes>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Shutdown);
        }
        let guard = self.consumer.lock().await;
        let Some(consumer) = guard.as_ref() else {
            return Err(Error::Shutdown);
        };
        let first = match tokio::time::timeout(wait, consumer.recv()).await {
            Err(_) => return Ok(Vec::new()),
            Ok(Err(err)) => return Err(kafka_error("receive replies", err)),
            Ok(Ok(message)) => live_body(&message, now_ms()),
        };
        let mut replies: Vec<Bytes> = first.into_iter().collect();
        while replies.len() < max.max(1) {
            match consumer.recv().now_or_never() {
                Some(Ok(message)) => replies.extend(live_body(&message, now_ms())),
                _ => break,
            }
        }
        Ok(replies)
    }

    async fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.renewal.stop().await;
        // The consumer goes first: the broker drops the connection of a
        // fetch from a deleted topic, which librdkafka logs as an error.
        if let Some(consumer) = self.consumer.lock().await.take() {
            let _ = tokio::task::spawn_blocking(move || drop(consumer)).await;
        }
        self.cluster.delete_topic(&self.address).await?;
        tracing::debug!(inbox = %self.address, "reply inbox closed");
        Ok(())
    }
}
