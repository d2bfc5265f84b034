//! Disque's part of the batch scenario: 50 `ADDJOB`s in one pipeline on
//! one multiplexed connection against `client.push_batch` (which the
//! Disque backend sends as 50 pipelined `ADDJOB`s on its connection).

use std::sync::Arc;

use bytes::Bytes;
use ezmq_core::Client;
use redis::Value;

use crate::raw;
use crate::scenario::batch::{BatchBroker, BatchSender};
use crate::target::Target;
use crate::BoxResult;

impl BatchBroker for Target {
    fn batch_name(&self) -> &'static str {
        "Disque"
    }

    fn raw_batch_col(&self) -> &'static str {
        "raw 50 pipelined ADDJOB"
    }

    fn raw_batch_note(&self) -> &'static str {
        "one multiplexed `redis` connection shared by the tasks, each batch one pipeline of 50 \
         `ADDJOB q body 5000 REPLICATE 1 RETRY 30 TTL 600` (what ezmq sends for a default push \
         on a single node), awaiting the 50 replies."
    }

    async fn batch_ezmq(&self) -> BoxResult<Client> {
        self.ezmq().await
    }

    async fn raw_batch_sender(&self, queue: &str) -> BoxResult<BatchSender> {
        let (conn, queue) = (self.raw().await?, queue.to_owned());
        Ok(Arc::new(move |bodies: Arc<[Bytes]>| {
            let (mut conn, queue) = (conn.clone(), queue.clone());
            Box::pin(async move {
                let mut pipe = redis::Pipeline::with_capacity(bodies.len());
                for body in bodies.iter() {
                    pipe.add_command(raw::addjob(&queue, body));
                }
                let replies: Vec<Value> = pipe.query_async(&mut conn).await?;
                if replies.len() != bodies.len() {
                    return Err(format!(
                        "{} replies to a batch of {} ADDJOB",
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
        raw::drain(&mut self.raw().await?, queue).await?;
        Ok(())
    }
}
