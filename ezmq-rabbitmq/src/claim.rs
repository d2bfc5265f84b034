//! Exclusive claims: a one-message queue that refuses a second message
//! (keyed claims: [`crate::hold`]).

use std::time::Duration;

use async_trait::async_trait;
use ezmq_core::spi::{ClaimOutcome, ExclusiveClaim};
use ezmq_core::{Headers, Result, Topic};
use lapin::options::QueueDeclareOptions;
use lapin::BasicProperties;

use crate::backend::RabbitBackend;
use crate::error::RabbitError;
use crate::hold;
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

    /// A gate queue that takes one message and a record queue naming
    /// the holder (see the `hold` module of this crate): the claim lasts
    /// `hold` from the winning publish; the caller's `hold` is its own
    /// (it is the message's expiration, not a queue argument).
    async fn claim(&self, key: &Topic, token: &str, hold: Duration) -> Result<ClaimOutcome> {
        hold::claim(&self.inner, key, token, hold).await
    }

    /// The gate's message count (a declaration: touches no message), then
    /// the record's token; waits a moment for a record not written yet,
    /// and fails (retryable) rather than answering `None` for a held key.
    async fn holder(&self, key: &Topic) -> Result<Option<String>> {
        hold::holder(&self.inner, key).await
    }

    /// Acks the record's and the gate's messages when both name `token`,
    /// then deletes the key's queues if still empty.
    async fn release(&self, key: &Topic, token: &str) -> Result<bool> {
        hold::release(&self.inner, key, token).await
    }
}
