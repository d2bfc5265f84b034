//! Dead letters: where a job goes once it has failed for good, and the
//! record that carries it there.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::consume_options::DeadLetter;
use crate::error::{Error, Result};
use crate::headers::Headers;
use crate::job::Job;
use crate::spi::Source;
use crate::topic::Topic;

/// Suffix of the default dead-letter topic: `<topic>.dead-letter`.
const DEFAULT_SUFFIX: &str = ".dead-letter";

/// A header with the time of a job's first failed attempt, in
/// milliseconds since the Unix epoch, for backends or listeners that carry
/// it across retries; [`DeadLetterRecord::first_failed_at_ms`] is read from
/// it.
pub(crate) const FIRST_FAILED_AT_HEADER: &str = "ezmq-first-failed-at";

/// The body of a job on a dead-letter topic: a JSON object describing the
/// job that failed for good.
///
/// The original body is kept in `body` when it is valid UTF-8 (JSON and text
/// payloads stay readable), otherwise in `body_bytes` as an array of byte
/// values; exactly one of the two is set. [`DeadLetterRecord::body`] gives
/// the original bytes back either way.
///
/// ```
/// use ezmq_core::{DeadLetterRecord, Job, JobId, Topic};
///
/// # let json = r#"{"topic":"orders","job_id":"D-1","attempts":5,"error":"boom",
/// #   "permanent":false,"failed_at_ms":0,"body":"{\"n\":1}"}"#;
/// # let dead = Job::new(JobId::new("D-2"), Topic::new("orders.dead-letter").unwrap(), json.into());
/// // In a listener on `orders.dead-letter`:
/// let record = DeadLetterRecord::from_job(&dead)?;
/// assert_eq!(record.topic, "orders");
/// assert_eq!(&record.body()[..], br#"{"n":1}"#);
/// # Ok::<(), ezmq_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeadLetterRecord {
    /// The topic the job failed on.
    pub topic: String,
    /// The failed job's id.
    pub job_id: String,
    /// The attempt that failed last (1-based; the first delivery is 1).
    pub attempts: u32,
    /// The last error's message (for a panic, `handler panicked: <msg>`).
    pub error: String,
    /// Whether the last error was [`Permanent`](crate::Permanent).
    #[serde(default)]
    pub permanent: bool,
    /// When the job was dead-lettered, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub failed_at_ms: u64,
    /// When the job's first attempt failed, in milliseconds since the Unix
    /// epoch: `failed_at_ms` when the first attempt was the last, else the
    /// `ezmq-first-failed-at` header when the job carries it; `None`
    /// when unknown (and in records written before this field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failed_at_ms: Option<u64>,
    /// The job's headers (reserved `ezmq-` ones included), so the job can
    /// be pushed again as it was. Empty in records written before this
    /// field existed.
    #[serde(default, skip_serializing_if = "Headers::is_empty")]
    pub headers: Headers,
    /// The original body, when it is valid UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The original body as byte values, when it is not valid UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_bytes: Option<Vec<u8>>,
}

impl DeadLetterRecord {
    /// Describes `job`, whose attempt `attempts` failed with `error`.
    pub fn new(job: &Job, attempts: u32, error: impl Into<String>, permanent: bool) -> Self {
        let (body, body_bytes) = match std::str::from_utf8(job.body()) {
            Ok(text) => (Some(text.to_owned()), None),
            Err(_) => (None, Some(job.body().to_vec())),
        };
        let failed_at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let first_failed_at_ms = if attempts <= 1 {
            Some(failed_at_ms)
        } else {
            job.headers()
                .get(FIRST_FAILED_AT_HEADER)
                .and_then(|v| v.parse().ok())
        };
        DeadLetterRecord {
            topic: job.topic().as_str().to_owned(),
            job_id: job.id().as_str().to_owned(),
            attempts,
            error: error.into(),
            permanent,
            failed_at_ms,
            first_failed_at_ms,
            headers: job.headers().clone(),
            body,
            body_bytes,
        }
    }

    /// Decodes the body of a job fetched from a dead-letter topic.
    pub fn from_job(job: &Job) -> Result<Self> {
        job.json()
    }

    /// The original body, whichever way it was stored.
    pub fn body(&self) -> Bytes {
        match (&self.body, &self.body_bytes) {
            (Some(text), _) => Bytes::copy_from_slice(text.as_bytes()),
            (None, Some(bytes)) => Bytes::copy_from_slice(bytes),
            (None, None) => Bytes::new(),
        }
    }
}

/// The dead-letter topic of a listener on `topic`, or `None` for
/// [`DeadLetter::Drop`]. Checked when the listener starts.
///
/// The default for consumer group `g` of topic `t` is `t.g.dead-letter`, a
/// topic a normal listener can read.
pub(crate) fn resolve_topic(source: &Source, dead_letter: &DeadLetter) -> Result<Option<Topic>> {
    let topic = source.topic();
    let resolved = match (dead_letter, source.group()) {
        (DeadLetter::Drop, _) => return Ok(None),
        (DeadLetter::Topic(name), _) => Topic::new(name.as_str())?,
        (DeadLetter::Default, Some(group)) => {
            Topic::new(format!("{topic}.{group}{DEFAULT_SUFFIX}"))?
        }
        (DeadLetter::Default, None) => default_for(topic)?,
    };
    if &resolved == topic {
        return Err(Error::invalid_option(
            "dead_letter",
            format!("the dead-letter topic cannot be the consumed topic {topic:?}"),
        ));
    }
    Ok(Some(resolved))
}

fn default_for(topic: &Topic) -> Result<Topic> {
    Ok(match () {
        () if topic.is_internal() => {
            // Internal names are built from validated parts; appending the
            // suffix (valid characters only) keeps them internal and distinct.
            Topic::from_broker(format!("{topic}{DEFAULT_SUFFIX}"))
        }
        () => Topic::new(format!("{topic}{DEFAULT_SUFFIX}"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobId;

    fn job(body: &'static [u8]) -> Job {
        Job::new(
            JobId::new("D-1"),
            Topic::new("orders").unwrap(),
            Bytes::from_static(body),
        )
    }

    #[test]
    fn utf8_body_is_kept_as_text() {
        let rec = DeadLetterRecord::new(&job(b"{\"n\":1}"), 3, "boom", false);
        let json = serde_json::to_value(&rec).unwrap();
        assert_eq!(json["body"], "{\"n\":1}");
        assert!(json.get("body_bytes").is_none());
        assert_eq!(json["topic"], "orders");
        assert_eq!(json["job_id"], "D-1");
        assert_eq!(json["attempts"], 3);
        assert_eq!(json["error"], "boom");
        let back: DeadLetterRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, rec);
        assert_eq!(&back.body()[..], b"{\"n\":1}");
    }

    #[test]
    fn headers_and_first_failure_are_kept_and_old_records_still_decode() {
        let mut headers = Headers::new();
        headers.insert("tenant", "acme");
        headers.insert(FIRST_FAILED_AT_HEADER, "1000");
        let failed = job(b"x").with_headers(headers.clone()).with_attempt(3);
        let rec = DeadLetterRecord::new(&failed, 3, "boom", false);
        assert_eq!(rec.first_failed_at_ms, Some(1000));
        assert_eq!(rec.headers, headers);
        let back: DeadLetterRecord =
            serde_json::from_slice(&serde_json::to_vec(&rec).unwrap()).unwrap();
        assert_eq!(back, rec);
        let once = DeadLetterRecord::new(&job(b"x"), 1, "boom", true);
        assert_eq!(once.first_failed_at_ms, Some(once.failed_at_ms));
        let unknown = DeadLetterRecord::new(&job(b"x"), 2, "boom", false);
        assert_eq!(unknown.first_failed_at_ms, None);
        let old = r#"{"topic":"t","job_id":"D-1","attempts":5,"error":"e","body":"b"}"#;
        let old: DeadLetterRecord = serde_json::from_str(old).unwrap();
        assert!(old.headers.is_empty());
        assert_eq!(old.first_failed_at_ms, None);
    }

    #[test]
    fn binary_body_is_kept_as_bytes() {
        let rec = DeadLetterRecord::new(&job(&[0xff, 0x00, 0x80]), 1, "bad", true);
        assert_eq!(rec.body, None);
        assert_eq!(rec.body_bytes.as_deref(), Some(&[0xff, 0x00, 0x80][..]));
        let json = serde_json::to_vec(&rec).unwrap();
        let back: DeadLetterRecord = serde_json::from_slice(&json).unwrap();
        assert_eq!(&back.body()[..], &[0xff, 0x00, 0x80]);
        assert!(back.permanent);
    }

    #[test]
    fn resolves_dead_letter_topics() {
        let t = Topic::new("orders").unwrap();
        let src = |t: &Topic| Source::Topic(t.clone());
        let group = Source::Group {
            topic: t.clone(),
            group: Topic::new("billing").unwrap(),
        };
        let d = resolve_topic(&group, &DeadLetter::Default)
            .unwrap()
            .unwrap();
        assert_eq!(d.as_str(), "orders.billing.dead-letter");
        let d = resolve_topic(&src(&t), &DeadLetter::Default)
            .unwrap()
            .unwrap();
        assert_eq!(d.as_str(), "orders.dead-letter");
        let d = resolve_topic(&src(&t), &DeadLetter::Topic("failed".into()))
            .unwrap()
            .unwrap();
        assert_eq!(d.as_str(), "failed");
        assert!(resolve_topic(&src(&t), &DeadLetter::Drop)
            .unwrap()
            .is_none());
        assert!(resolve_topic(&src(&t), &DeadLetter::Topic("bad name".into())).is_err());
        assert!(resolve_topic(&src(&t), &DeadLetter::Topic("orders".into())).is_err());
        let long = Topic::new("x".repeat(195)).unwrap();
        assert!(resolve_topic(&src(&long), &DeadLetter::Default).is_err());
        let internal = Topic::internal("bc", &["orders"]).unwrap();
        let d = resolve_topic(&src(&internal), &DeadLetter::Default)
            .unwrap()
            .unwrap();
        assert!(d.is_internal());
        assert_eq!(d.as_str(), "__ezmq|bc|orders.dead-letter");
    }
}
