//! PostgreSQL's part of the batch scenario: ezmq's batch statement (one
//! `INSERT … SELECT FROM unnest(…)` of 50 rows and one `NOTIFY`) against
//! `client.push_batch` (which sends that statement).

use std::sync::Arc;

use bytes::Bytes;
use ezmq_core::Client;

use super::{job_id, PostgresBench};
use crate::brokers::RawBroker;
use crate::scenario::batch::{BatchBroker, BatchSender};
use crate::BoxResult;

/// ezmq's batch push, word for word.
const PUSH_BATCH: &str = "WITH ins AS (INSERT INTO ezmq.jobs (queue, id, body, headers, attempt, visible_at, expires_at) \
                          SELECT $1, t.id, t.body, t.headers::jsonb, t.attempt, \
                          now() + t.delay_ms * interval '1 millisecond', \
                          CASE WHEN t.ttl_ms > 0 THEN now() + t.ttl_ms * interval '1 millisecond' END \
                          FROM unnest($2::text[], $3::bytea[], $4::text[], $5::int[], $6::bigint[], $7::bigint[]) \
                          AS t(id, body, headers, attempt, delay_ms, ttl_ms) \
                          ON CONFLICT (queue, id) DO NOTHING RETURNING queue) \
                          SELECT pg_notify('ezmq_ezmq', queue) FROM (SELECT queue FROM ins LIMIT 1) one";

impl BatchBroker for PostgresBench {
    fn batch_name(&self) -> &'static str {
        self.name()
    }

    fn raw_batch_col(&self) -> &'static str {
        "raw INSERT … unnest of 50"
    }

    fn raw_batch_note(&self) -> &'static str {
        "one `sqlx` pool of 10 connections shared by the tasks, each batch ezmq's batch \
         statement word for word (`INSERT INTO ezmq.jobs … SELECT FROM unnest(ids, bodies, \
         headers, attempts, delays, ttls)` of 50 rows with one `pg_notify`), with fresh UUIDv7 \
         ids and `{}` headers (ezmq's carry the job id and its metadata)."
    }

    async fn batch_ezmq(&self) -> BoxResult<Client> {
        self.ezmq().await
    }

    async fn raw_batch_sender(&self, queue: &str) -> BoxResult<BatchSender> {
        let (pool, queue) = (self.pool.clone(), queue.to_owned());
        Ok(Arc::new(move |bodies: Arc<[Bytes]>| {
            let (pool, queue) = (pool.clone(), queue.clone());
            Box::pin(async move {
                let n = bodies.len();
                let ids: Vec<String> = bodies.iter().map(|_| job_id()).collect();
                let bodies: Vec<&[u8]> = bodies.iter().map(|b| b.as_ref()).collect();
                sqlx::query(PUSH_BATCH)
                    .bind(&queue)
                    .bind(&ids)
                    .bind(&bodies)
                    .bind(vec!["{}"; n])
                    .bind(vec![1_i32; n])
                    .bind(vec![0_i64; n])
                    .bind(vec![0_i64; n])
                    .execute(&pool)
                    .await?;
                Ok(())
            })
        }))
    }

    async fn batch_cleanup(&self, queue: &str) -> BoxResult<()> {
        self.cleanup(queue).await
    }
}
