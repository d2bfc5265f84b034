//! What a reply handler receives ([`Request`]) and what a caller gets back
//! ([`Reply`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ezmq_core::{Result, Topic};
use serde::de::DeserializeOwned;
use uuid::Uuid;

/// A request as a reply handler sees it.
///
/// ```
/// # fn demo(req: ezmq_request_reply::Request) -> ezmq_core::Result<()> {
/// #[derive(serde::Deserialize)]
/// struct Quote { sku: String }
///
/// let quote: Quote = req.json()?;
/// println!("{} ({:?} left)", quote.sku, req.remaining());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Request {
    pub(crate) correlation_id: Uuid,
    pub(crate) topic: Topic,
    pub(crate) deadline: SystemTime,
    pub(crate) attempt: u32,
    pub(crate) body: Bytes,
}

impl Request {
    /// The raw body the caller sent.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Takes the raw body out of the request.
    pub fn into_body(self) -> Bytes {
        self.body
    }

    /// Decodes the body as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        Ok(serde_json::from_slice(&self.body)?)
    }

    /// When the caller stops waiting (by the caller's clock). A reply
    /// produced after it is dropped.
    pub fn deadline(&self) -> SystemTime {
        self.deadline
    }

    /// Time left until [`Request::deadline`] (zero once it has passed).
    pub fn remaining(&self) -> Duration {
        self.deadline
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
    }

    /// The id that pairs this request with its reply.
    pub fn correlation_id(&self) -> Uuid {
        self.correlation_id
    }

    /// The topic the request was sent to.
    pub fn topic(&self) -> &Topic {
        &self.topic
    }

    /// This delivery's attempt number, starting at 1 (above 1 only for
    /// at-least-once requests that were redelivered).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

/// A successful reply.
///
/// ```
/// # fn demo(reply: ezmq_request_reply::Reply) -> ezmq_core::Result<()> {
/// #[derive(serde::Deserialize)]
/// struct Price { cents: u64 }
///
/// let price: Price = reply.json()?;
/// # let _ = price.cents;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Reply {
    pub(crate) correlation_id: Uuid,
    pub(crate) body: Bytes,
}

impl Reply {
    /// The raw body the handler returned.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Takes the raw body out of the reply.
    pub fn into_body(self) -> Bytes {
        self.body
    }

    /// Decodes the body as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        Ok(serde_json::from_slice(&self.body)?)
    }

    /// The id that paired the request with this reply.
    pub fn correlation_id(&self) -> Uuid {
        self.correlation_id
    }
}

/// Milliseconds since the Unix epoch (0 before it, saturating far after).
pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The inverse of [`unix_ms`].
pub(crate) fn from_unix_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH
        .checked_add(Duration::from_millis(ms))
        .unwrap_or(UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_ms_round_trips() {
        let now = SystemTime::now();
        let back = from_unix_ms(unix_ms(now));
        assert!(now.duration_since(back).unwrap() < Duration::from_millis(1));
        assert_eq!(unix_ms(UNIX_EPOCH), 0);
    }

    #[test]
    fn remaining_is_zero_after_the_deadline() {
        let req = Request {
            correlation_id: Uuid::new_v4(),
            topic: Topic::new("t").unwrap(),
            deadline: SystemTime::now() - Duration::from_secs(1),
            attempt: 1,
            body: Bytes::from_static(b"{\"n\":3}"),
        };
        assert_eq!(req.remaining(), Duration::ZERO);
        #[derive(serde::Deserialize)]
        struct N {
            n: u32,
        }
        assert_eq!(req.json::<N>().unwrap().n, 3);
        assert!(req.json::<Vec<u8>>().is_err());
    }
}
