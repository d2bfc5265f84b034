//! Job priorities: three lanes per topic.
//!
//! A job pushed [`with_priority`](crate::PushOptions::with_priority)
//! `High` or `Low` is stored in its topic's lane, a queue of its own
//! (`__ezmq|lane|high|<topic>`, `__ezmq|lane|low|<topic>`); `Normal`
//! jobs stay in the topic's queue, so plain pushes and listeners pay
//! nothing. Because a lane is a queue, a delayed or retried job waits in
//! its lane and comes back to it: a job keeps its priority on every
//! broker, through delay, retry, dead letter and requeue.
//!
//! Listeners split their fetches between the lanes by weight (see
//! [`Priority::weight`] and `docs/jobs.md`).

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::headers::Headers;
use crate::topic::Topic;

/// The header a job's priority travels in (written only when it is not
/// [`Priority::Normal`]).
pub const PRIORITY_HEADER: &str = "ezmq-priority";

/// A job's priority: which lane of its topic it waits in.
///
/// While more than one lane has jobs waiting, a listener's starts are
/// split High : Normal : Low = 6 : 3 : 1 (a smooth weighted round-robin,
/// so a waiting High job is taken by the next fetch of two jobs or more);
/// a lane with nothing waiting gives its share to the others, highest
/// first. Low jobs therefore get at least a tenth of a saturated
/// listener's starts and never starve.
///
/// ```
/// use ezmq_core::Priority;
///
/// let p: Priority = "high".parse()?;
/// assert_eq!(p, Priority::High);
/// assert_eq!(p.to_string(), "high");
/// assert_eq!(Priority::default(), Priority::Normal);
/// assert!(Priority::High < Priority::Low); // sorted highest first
/// # Ok::<(), ezmq_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// Taken first: 6 of every 10 starts while every lane has jobs.
    High,
    /// The topic's own queue: 3 of every 10 starts while every lane has
    /// jobs.
    #[default]
    Normal,
    /// Taken last, never starved: 1 of every 10 starts while every lane
    /// has jobs.
    Low,
}

impl Priority {
    /// Every priority, highest first.
    pub const ALL: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];

    /// The lane's share of starts while every lane has jobs waiting: 6,
    /// 3, 1.
    pub const fn weight(self) -> u32 {
        match self {
            Priority::High => 6,
            Priority::Normal => 3,
            Priority::Low => 1,
        }
    }

    /// `high`, `normal` or `low`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }

    /// The priority a job's headers carry ([`PRIORITY_HEADER`]); `Normal`
    /// without it.
    pub fn of_headers(headers: &Headers) -> Priority {
        headers
            .get(PRIORITY_HEADER)
            .and_then(|value| value.parse().ok())
            .unwrap_or_default()
    }

    /// The queue this priority's jobs of `topic` wait in: `topic` itself
    /// for `Normal`, its lane otherwise.
    pub(crate) fn lane(self, topic: &Topic) -> Result<Topic> {
        match self {
            Priority::Normal => Ok(topic.clone()),
            other => Topic::internal("lane", &[other.as_str(), topic.as_str()]),
        }
    }

    /// The index of this priority in [`Priority::ALL`].
    pub(crate) const fn index(self) -> usize {
        match self {
            Priority::High => 0,
            Priority::Normal => 1,
            Priority::Low => 2,
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Priority {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "high" => Ok(Priority::High),
            "normal" => Ok(Priority::Normal),
            "low" => Ok(Priority::Low),
            _ => Err(Error::invalid_option(
                "priority",
                format!("{s:?} is not a priority: high, normal or low"),
            )),
        }
    }
}

/// The three queues of `topic`, highest first.
pub(crate) fn lanes(topic: &Topic) -> Result<[Topic; 3]> {
    Ok([
        Priority::High.lane(topic)?,
        topic.clone(),
        Priority::Low.lane(topic)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_lanes_are_distinct_queues() {
        for p in Priority::ALL {
            assert_eq!(p.as_str().parse::<Priority>().ok(), Some(p));
            assert_eq!(Priority::ALL[p.index()], p);
        }
        assert!("urgent".parse::<Priority>().is_err());
        let orders = Topic::new("orders").unwrap();
        let [high, normal, low] = lanes(&orders).unwrap();
        assert_eq!(normal, orders);
        assert_eq!(high.as_str(), "__ezmq|lane|high|orders");
        assert_eq!(low.as_str(), "__ezmq|lane|low|orders");
        let mut headers = Headers::new();
        assert_eq!(Priority::of_headers(&headers), Priority::Normal);
        headers.insert(PRIORITY_HEADER, "low");
        assert_eq!(Priority::of_headers(&headers), Priority::Low);
    }
}
