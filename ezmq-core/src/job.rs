//! Jobs (messages) as a handler sees them.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::headers::Headers;
use crate::topic::Topic;

/// A job's id, the same on every delivery and through delay, retry, dead
/// letter and requeue: the one the producer chose
/// ([`PushOptions::with_message_id`](crate::PushOptions::with_message_id)),
/// else a UUIDv7 core gave the push (see [`JobMeta`](crate::JobMeta)). A
/// job pushed by another client has the broker's own id.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(Arc<str>);

impl JobId {
    /// Wraps an id.
    pub fn new(id: impl Into<String>) -> Self {
        JobId(Arc::from(id.into()))
    }

    /// A new id: a UUIDv7, so ids sort by creation time (to the
    /// millisecond, then by a random tail).
    pub fn generate() -> Self {
        Self::generate_at(std::time::SystemTime::now())
    }

    /// [`generate`](Self::generate) with the clock already read.
    pub(crate) fn generate_at(now: std::time::SystemTime) -> Self {
        let uuid = crate::job_id_gen::next_v7(now);
        let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        JobId(Arc::from(&*uuid.hyphenated().encode_lower(&mut text)))
    }

    /// The id's text, shared (a header holding the id copies nothing).
    pub(crate) fn shared(&self) -> &Arc<str> {
        &self.0
    }

    /// The id whose text is `text`.
    pub(crate) fn from_shared(text: Arc<str>) -> Self {
        JobId(text)
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// When the id was generated, for an id from [`JobId::generate`];
    /// `None` for any other id.
    pub fn created_at(&self) -> Option<std::time::SystemTime> {
        let uuid = uuid::Uuid::try_parse(&self.0).ok()?;
        if uuid.get_version_num() != 7 {
            return None;
        }
        let (secs, nanos) = uuid.get_timestamp()?.to_unix();
        std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// A job delivered from a topic: id, body, headers and attempt number.
///
/// ```
/// use ezmq_core::{Job, JobId, Topic};
///
/// let job = Job::new(JobId::new("id-1"), Topic::new("t").unwrap(), r#"{"n":1}"#.into());
/// #[derive(serde::Deserialize)]
/// struct Msg { n: u32 }
/// assert_eq!(job.json::<Msg>().unwrap().n, 1);
/// assert_eq!(job.attempt(), 1);
/// assert!(job.headers().is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct Job {
    id: JobId,
    topic: Topic,
    body: Bytes,
    headers: Headers,
    attempt: u32,
}

impl Job {
    /// A job delivered for the first time, without headers.
    pub fn new(id: JobId, topic: Topic, body: Bytes) -> Self {
        Job {
            id,
            topic,
            body,
            headers: Headers::new(),
            attempt: 1,
        }
    }

    /// Sets the headers.
    #[must_use]
    pub fn with_headers(mut self, headers: Headers) -> Self {
        self.headers = headers;
        self
    }

    /// The job as delivered from `topic` (a job read from a priority lane
    /// belongs to the lane's topic).
    pub(crate) fn set_topic(&mut self, topic: Topic) {
        self.topic = topic;
    }

    /// Sets the attempt number (1 for a first delivery; 0 is taken as 1).
    #[must_use]
    pub fn with_attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt.max(1);
        self
    }

    /// The message id.
    pub fn id(&self) -> &JobId {
        &self.id
    }

    /// The topic the job was delivered from.
    pub fn topic(&self) -> &Topic {
        &self.topic
    }

    /// The raw body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Takes the raw body out of the job.
    pub fn into_body(self) -> Bytes {
        self.body
    }

    /// The headers (user headers and the ones ezmq sets, prefixed `ezmq-`).
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// Decodes the body as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        Ok(serde_json::from_slice(&self.body)?)
    }

    /// The job's [`JobMeta`](crate::JobMeta): id, attempt, its own retry policy, when it was
    /// pushed and scheduled.
    pub fn meta(&self) -> crate::JobMeta {
        crate::JobMeta::of(self)
    }

    /// This delivery's attempt number, starting at 1: failed attempts
    /// (errors, panics, a consumer that died or timed out) before it, plus
    /// one.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}
