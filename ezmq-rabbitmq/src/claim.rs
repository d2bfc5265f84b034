//! Exclusive claims: a one-message queue that refuses a second message.

use std::time::Duration;

use async_trait::async_trait;
use ezmq_core::spi::{ClaimOutcome, ExclusiveClaim};
use ezmq_core::{Headers, Result, Topic};
use lapin::options::QueueDeclareOptions;
use lapin::BasicProperties;

use crate::backend::RabbitBackend;
use crate::error::RabbitError;
use crate::names::short;
use crate::publish;
use crate::topology::{self, millis, string};

#[async_trait]
impl ExclusiveClaim for RabbitBackend {
    /// Declares the claim's queue (a durable classic queue with
    /// `x-max-length` 1, `x-overflow` `reject-publish`, `x-expires` =
    /// `hold`) and publishes one message with a confirm: the broker accepts
    /// exactly one, so the ack names the winner and every other publisher
    /// gets a nack. A classic queue is a single process on one node that
    /// handles publishes one at a time, so this holds across a cluster
    /// (when that node is down the claim fails with an error: nobody wins,
    /// never two). Quorum queues are not used: their length limit is not
    /// exact under concurrent publishes. The queue (and
    /// the claim) disappears once unused for `hold`; every declaration
    /// restarts that timer, so a claim lasts `hold` after the last
    /// attempt. Every caller of one key must use the same `hold`.
    async fn try_claim(&self, key: &Topic, hold: Duration) -> Result<bool> {
        self.inner.ensure_open()?;
        let session = self.inner.connector.session().await?;
        let queue = self.inner.names.claim_queue(key);
        // Classic, whatever the configured type: a quorum queue checks
        // `x-max-length` against a lagging view and accepted two of twelve
        // concurrent claims in our tests; a classic queue is one process on
        // one node that takes publishes in order, so it is exact, on a
        // cluster as well.
        let mut args = lapin::types::FieldTable::default();
        args.insert("x-queue-type".into(), string("classic"));
        args.insert("x-max-length".into(), lapin::types::AMQPValue::LongInt(1));
        args.insert("x-overflow".into(), string("reject-publish"));
        args.insert("x-expires".into(), millis(hold));
        let options = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        let name = queue.clone();
        session
            .declaring(&queue, move |channel| async move {
                topology::declare_queue(&channel, &name, options, args)
                    .await
                    .map(drop)
            })
            .await?;
        let properties = BasicProperties::default()
            .with_message_id(short("message id", &publish::new_message_id())?)
            .with_delivery_mode(2)
            .with_headers(publish::header_table(&Headers::new())?);
        match publish::confirm(&session, "", &queue, b"claimed", properties, true).await {
            Ok(()) => Ok(true),
            Err(RabbitError::Nacked { .. }) => Ok(false),
            Err(err) => Err(err.into()),
        }
    }

    async fn claim(&self, _key: &Topic, _token: &str, _hold: Duration) -> Result<ClaimOutcome> {
        Err(self.hold_unsupported())
    }

    async fn holder(&self, _key: &Topic) -> Result<Option<String>> {
        Err(self.hold_unsupported())
    }

    async fn release(&self, _key: &Topic, _token: &str) -> Result<bool> {
        Err(self.hold_unsupported())
    }
}

impl RabbitBackend {
    fn hold_unsupported(&self) -> ezmq_core::Error {
        ezmq_core::Error::Unsupported {
            backend: "rabbitmq",
            capability: ezmq_core::spi::Capability::ExclusiveClaim,
        }
    }
}
