//! The consume-listener runtime. (Placeholder: being written.)

use std::sync::Arc;

use crate::backend::Backend;
use crate::client::Client;
use crate::consume_options::ConsumeOptions;
use crate::error::{Error, Result};
use crate::handler::Handler;
use crate::topic::Topic;

/// A running consume listener.
#[derive(Debug)]
pub struct ListenerHandle {
    topic: Topic,
}

impl ListenerHandle {
    /// The topic the listener consumes.
    pub fn topic(&self) -> &Topic {
        &self.topic
    }
}

pub(crate) fn start<B: Backend>(
    _client: &Client<B>,
    _topic: Topic,
    _handler: Arc<dyn Handler>,
    _options: ConsumeOptions,
) -> Result<ListenerHandle> {
    Err(Error::Shutdown)
}
