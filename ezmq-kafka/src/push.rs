//! Pushes: one record per job, ezmq's headers as Kafka headers (no
//! envelope), produced by one idempotent producer per client and
//! returned once the partition's in-sync replicas stored it (acks=all).

use std::time::Duration;

use bytes::Bytes;
use ezmq_core::{Error, JobId, PushOptions, Result, Topic};
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;

use crate::cluster::kafka_error;
use crate::config::KafkaConfig;
use crate::consumer::record::{now_ms, EXPIRES_HEADER};

/// The largest record the producer sends: core's default payload limit
/// (1 MiB) with room for headers.
pub(crate) const MAX_RECORD_BYTES: u32 = 2 * 1024 * 1024;

/// The client's producer: idempotent (acks=all, ordered retries without
/// duplicates), with a push's timeout as its delivery timeout.
pub(crate) fn create(config: &KafkaConfig) -> Result<FutureProducer> {
    ClientConfig::new()
        .set("bootstrap.servers", config.brokers().join(","))
        .set("client.id", "ezmq")
        .set("enable.idempotence", "true")
        // ezmq creates every topic it writes to; a reply to an inbox that
        // was closed (its topic deleted) must not create it again.
        .set("allow.auto.create.topics", "false")
        .set("linger.ms", "1")
        // A broker back from a restart is found within a second.
        .set("reconnect.backoff.max.ms", "1000")
        .set("partitioner", "murmur2_random")
        .set("message.max.bytes", MAX_RECORD_BYTES.to_string())
        .set(
            "message.timeout.ms",
            config.command_timeout.as_millis().max(1).to_string(),
        )
        .set(
            "socket.connection.setup.timeout.ms",
            config.connect_timeout.as_millis().max(1).to_string(),
        )
        .create()
        .map_err(|err| Error::backend(format!("creating the Kafka producer failed: {err}"), false))
}

/// Produces one stamped job to `kafka_topic`; its id.
pub(crate) async fn publish(
    producer: &FutureProducer,
    kafka_topic: &str,
    topic: &Topic,
    body: &Bytes,
    options: &PushOptions,
) -> Result<JobId> {
    publish_with(producer, kafka_topic, topic, body, options, &[]).await
}

/// [`publish`] with Kafka headers of ezmq's own besides the job's (a
/// delayed job's destination and due time).
pub(crate) async fn publish_with(
    producer: &FutureProducer,
    kafka_topic: &str,
    topic: &Topic,
    body: &Bytes,
    options: &PushOptions,
    extra: &[(&str, String)],
) -> Result<JobId> {
    let id = options.stamped_id().unwrap_or_else(JobId::generate);
    let mut headers = OwnedHeaders::new_with_capacity(options.headers.len() + 1 + extra.len());
    for (key, value) in extra {
        headers = headers.insert(Header {
            key,
            value: Some(value.as_str()),
        });
    }
    for (name, value) in options.headers.iter() {
        headers = headers.insert(Header {
            key: name,
            value: Some(value),
        });
    }
    if let Some(ttl) = options.ttl {
        let at = now_ms().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        headers = headers.insert(Header {
            key: EXPIRES_HEADER,
            value: Some(&at.to_string()),
        });
    }
    let mut record = FutureRecord::<str, [u8]>::to(kafka_topic)
        .payload(&body[..])
        .headers(headers);
    if let Some(key) = crate::push_options::key_of(options) {
        record = record.key(key);
    }
    // A full local queue waits (backpressure) within the delivery
    // timeout, which librdkafka enforces from here on.
    match producer.send(record, Duration::from_secs(60)).await {
        Ok(delivery) => {
            tracing::trace!(topic = %topic, message_id = %id, partition = delivery.partition, offset = delivery.offset, "job stored");
            Ok(id)
        }
        Err((err, _)) => Err(not_stored(topic, err)),
    }
}

/// The error of a produce that failed: a timed-out or cut-off one may
/// have been stored.
pub(crate) fn not_stored(topic: &Topic, err: KafkaError) -> Error {
    match err.rdkafka_error_code() {
        Some(
            RDKafkaErrorCode::MessageTimedOut
            | RDKafkaErrorCode::RequestTimedOut
            | RDKafkaErrorCode::BrokerTransportFailure
            | RDKafkaErrorCode::AllBrokersDown,
        ) => Error::outcome_unknown(topic.as_str(), err),
        Some(RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize) => {
            Error::backend(
                format!("Kafka refused the job for {topic}: too large ({err})"),
                false,
            )
        }
        _ => kafka_error("push", err),
    }
}
