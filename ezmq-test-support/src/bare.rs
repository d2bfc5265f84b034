//! A backend with no optional ability, for tests that a feature asking for
//! one fails at once with [`Error::Unsupported`].

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{Backend, Capabilities, Capability, Delivery, Source};
use ezmq_core::{Error, JobId, PushOptions, Result, Topic};

/// A [`Backend`] named `"bare"` with [`Capabilities::none`]: publishing
/// fails with [`Error::Shutdown`] and receiving returns nothing, so a test
/// sees at once when a feature calls it instead of refusing.
///
/// ```
/// use ezmq_core::{Client, ClientConfig};
/// use ezmq_test_support::BareBackend;
///
/// let client = Client::new(BareBackend, ClientConfig::default());
/// # let _ = client;
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct BareBackend;

#[async_trait]
impl Backend for BareBackend {
    fn name(&self) -> &'static str {
        "bare"
    }

    fn abilities(&self) -> Capabilities {
        Capabilities::none()
    }

    async fn publish(&self, _: &Topic, _: Bytes, _: &PushOptions) -> Result<JobId> {
        Err(Error::Shutdown)
    }

    async fn receive(&self, _: &Source, _: usize, _: Duration) -> Result<Vec<Delivery>> {
        Ok(Vec::new())
    }

    async fn close(&self) -> Result<()> {
        Ok(())
    }
}

/// Panics unless `result` is [`Error::Unsupported`] for `wanted` on the
/// [`BareBackend`].
pub fn assert_unsupported<T: std::fmt::Debug>(result: Result<T>, wanted: Capability) {
    match result {
        Err(Error::Unsupported {
            backend: "bare",
            capability,
        }) if capability == wanted => {}
        other => panic!("expected Unsupported({wanted}), got {other:?}"),
    }
}
