//! Redis's part of the batch scenario: one pipeline of 50 `XADD`s on the
//! shared multiplexed connection against `client.push_batch` (which the
//! Redis backend sends as one pipeline of `XADD`s).

use std::sync::Arc;

use bytes::Bytes;
use ezmq_core::Client;
use redis::Value;

use super::{stream_key, RedisBench};
use crate::brokers::RawBroker;
use crate::scenario::batch::{BatchBroker, BatchSender};
use crate::BoxResult;

impl BatchBroker for RedisBench {
    fn batch_name(&self) -> &'static str {
        self.name()
    }

    fn raw_batch_col(&self) -> &'static str {
        "raw pipeline of 50 XADD"
    }

    fn raw_batch_note(&self) -> &'static str {
        "one multiplexed `redis` connection shared by the tasks, each batch one pipeline of 50 \
         `XADD s * body <12 B>` to the stream ezmq uses for the topic, awaiting the 50 replies \
         (ezmq's entries carry a job-id header field besides `body`)."
    }

    async fn batch_ezmq(&self) -> BoxResult<Client> {
        self.ezmq().await
    }

    async fn raw_batch_sender(&self, queue: &str) -> BoxResult<BatchSender> {
        let (mux, stream) = (self.mux.clone(), stream_key(queue));
        Ok(Arc::new(move |bodies: Arc<[Bytes]>| {
            let (mut conn, stream) = (mux.clone(), stream.clone());
            Box::pin(async move {
                let mut pipe = redis::Pipeline::with_capacity(bodies.len());
                for body in bodies.iter() {
                    pipe.cmd("XADD")
                        .arg(&stream)
                        .arg("*")
                        .arg("body")
                        .arg(body.as_ref());
                }
                let replies: Vec<Value> = pipe.query_async(&mut conn).await?;
                if replies.len() != bodies.len() {
                    return Err(format!(
                        "{} replies to a pipeline of {} XADD",
                        replies.len(),
                        bodies.len()
                    )
                    .into());
                }
                Ok(())
            })
        }))
    }

    async fn batch_cleanup(&self, queue: &str) -> BoxResult<()> {
        self.cleanup(queue).await
    }
}
