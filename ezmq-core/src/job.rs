//! Jobs as they come out of a backend.

use std::fmt;

use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::topic::Topic;

/// A job identifier assigned by the backend (for Disque,
/// `D-<node>-<random>-<ttl>`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(String);

impl JobId {
    /// Wraps a backend's job id.
    pub fn new(id: impl Into<String>) -> Self {
        JobId(id.into())
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
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

/// A job fetched from a topic.
///
/// ```
/// use ezmq_core::{Job, JobId, Topic};
///
/// let job = Job::new(JobId::new("id-1"), Topic::new("t").unwrap(), r#"{"n":1}"#.into());
/// #[derive(serde::Deserialize)]
/// struct Msg { n: u32 }
/// assert_eq!(job.json::<Msg>().unwrap().n, 1);
/// assert_eq!(job.attempt(), 1);
/// ```
#[derive(Clone, Debug)]
pub struct Job {
    id: JobId,
    topic: Topic,
    body: Bytes,
    nacks: u32,
    additional_deliveries: u32,
}

impl Job {
    /// A job delivered for the first time.
    pub fn new(id: JobId, topic: Topic, body: Bytes) -> Self {
        Job {
            id,
            topic,
            body,
            nacks: 0,
            additional_deliveries: 0,
        }
    }

    /// Sets the delivery counters reported by the backend.
    #[must_use]
    pub fn with_counters(mut self, nacks: u32, additional_deliveries: u32) -> Self {
        self.nacks = nacks;
        self.additional_deliveries = additional_deliveries;
        self
    }

    /// The job id.
    pub fn id(&self) -> &JobId {
        &self.id
    }

    /// The topic the job was fetched from.
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

    /// Decodes the body as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        Ok(serde_json::from_slice(&self.body)?)
    }

    /// How many times a handler gave the job back (NACK).
    pub fn nacks(&self) -> u32 {
        self.nacks
    }

    /// How many times the job was delivered again without a NACK (the
    /// consumer died or did not answer within the retry window).
    pub fn additional_deliveries(&self) -> u32 {
        self.additional_deliveries
    }

    /// This delivery's attempt number, starting at 1.
    pub fn attempt(&self) -> u32 {
        1 + self.nacks.saturating_add(self.additional_deliveries)
    }
}
