//! A record taken from a partition, as a job.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ezmq_core::{Headers, JobId, MESSAGE_ID_HEADER};
use rdkafka::message::{BorrowedMessage, Headers as _, Message};

/// The Kafka header of a job with a ttl: when it expires, in Unix
/// milliseconds (not one of the job's headers).
pub(crate) const EXPIRES_HEADER: &str = "ezmq-expires";

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One record of a partition, with what its job needs.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    /// The assignment it was taken under: a settle after the partition
    /// moved (and maybe came back) changes nothing.
    pub(crate) generation: u64,
    pub(crate) id: JobId,
    /// Its Kafka key: records of one key run one at a time, in offset
    /// order ([`KafkaPushOptions`](crate::KafkaPushOptions)).
    pub(crate) key: Option<Bytes>,
    pub(crate) headers: Headers,
    pub(crate) body: Bytes,
    pub(crate) attempt: u32,
    pub(crate) expires_ms: Option<u64>,
}

impl Record {
    /// The record of `message`, taken under assignment `generation`. A
    /// record without ezmq's id (a plain Kafka producer's) gets
    /// `k-<partition>-<offset>`.
    pub(crate) fn of(message: &BorrowedMessage<'_>, generation: u64) -> Record {
        let mut headers = Headers::new();
        let mut expires_ms = None;
        if let Some(kafka_headers) = message.headers() {
            for header in kafka_headers.iter() {
                let value = header
                    .value
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .unwrap_or_default();
                if header.key == EXPIRES_HEADER {
                    expires_ms = value.parse().ok();
                } else {
                    headers.insert(header.key, value);
                }
            }
        }
        let (partition, offset) = (message.partition(), message.offset());
        let id = headers
            .get(MESSAGE_ID_HEADER)
            .map_or_else(|| JobId::new(format!("k-{partition}-{offset}")), JobId::new);
        let attempt = headers.attempt().unwrap_or(1).max(1);
        Record {
            partition,
            offset,
            generation,
            id,
            key: message.key().map(Bytes::copy_from_slice),
            headers,
            body: Bytes::copy_from_slice(message.payload().unwrap_or_default()),
            attempt,
            expires_ms,
        }
    }

    /// True when its ttl ended before `now_ms`.
    pub(crate) fn expired(&self, now_ms: u64) -> bool {
        self.expires_ms.is_some_and(|at| now_ms >= at)
    }
}
