//! Pushes inside the caller's own transaction: the job exists if and only
//! if the transaction commits (the outbox problem, solved by the
//! database).

use bytes::Bytes;
use ezmq_core::{Error, JobId, MqClient, PushOptions, Result, Topic};
use serde::Serialize;
use sqlx::PgConnection;

use crate::backend::PostgresBackend;
use crate::push::Row;

/// Pushes a job to `topic` with the caller's connection `conn` — an open
/// `sqlx` transaction (`&mut tx`) or a plain connection — through
/// `client`'s producer pipeline (the job id and metadata, its priority
/// lane, trace context, metrics). Rolled back: no job. Committed: the job
/// is delivered, and waiting listeners are woken by the commit's
/// `NOTIFY`. The job's id.
///
/// `client` must be connected to the same database (its schema holds the
/// jobs table); a client of another backend fails with
/// [`Error::InvalidOption`] (option `client`), and so does a push with a
/// unique key (option `unique`: the key is a claim outside the
/// transaction, which a rollback would leave held). A message id
/// ([`PushOptions::with_message_id`]) works: its record is written in the
/// transaction too.
///
/// ```no_run
/// # async fn demo(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use ezmq_core::PushOptions;
///
/// let client = ezmq_postgres::connect_url("postgres://app@127.0.0.1/app").await?;
/// let mut tx = pool.begin().await?;
/// sqlx::query("INSERT INTO orders (id, total) VALUES ($1, $2)")
///     .bind(42_i64)
///     .bind(99_i64)
///     .execute(&mut *tx)
///     .await?;
/// ezmq_postgres::push_in_tx(&client, &mut tx, "emails", "order 42 placed".into(), PushOptions::new())
///     .await?;
/// tx.commit().await?; // the order and its job, or neither
/// # Ok(()) }
/// ```
pub async fn push_in_tx<C>(
    client: &C,
    conn: &mut PgConnection,
    topic: &str,
    body: Bytes,
    options: PushOptions,
) -> Result<JobId>
where
    C: MqClient + ?Sized,
{
    let topic = Topic::new(topic)?;
    let runtime = client.runtime();
    let backend = runtime.backend_as::<PostgresBackend>().ok_or_else(|| {
        Error::invalid_option(
            "client",
            format!(
                "push_in_tx needs a client connected to PostgreSQL; this one is {}",
                client.backend_name()
            ),
        )
    })?;
    if options.unique.is_some() {
        return Err(Error::invalid_option(
            "unique",
            "a unique key is a claim outside the caller's transaction, which a rollback \
             would leave held; push after the commit, or use with_message_id (its record \
             is written in the transaction)",
        ));
    }
    let inner = &backend.inner;
    runtime
        .publish_with(&topic, body, options, |queue, body, options| async move {
            let row = Row::of(&options)?;
            inner
                .timed_push(
                    &queue,
                    inner.insert(&queue, &body, &options, &row).execute(conn),
                )
                .await
                .map(drop)
        })
        .await
}

/// [`push_in_tx`] of `value` encoded as JSON.
pub async fn push_json_in_tx<C, T>(
    client: &C,
    conn: &mut PgConnection,
    topic: &str,
    value: &T,
    options: PushOptions,
) -> Result<JobId>
where
    C: MqClient + ?Sized,
    T: Serialize + ?Sized,
{
    let body = serde_json::to_vec(value)?;
    push_in_tx(client, conn, topic, body.into(), options).await
}

/// [`push_in_tx`] of several jobs of one topic, in order, in the same
/// transaction: each job's id, or the first error (after which the caller
/// rolls back).
pub async fn push_batch_in_tx<C>(
    client: &C,
    conn: &mut PgConnection,
    topic: &str,
    jobs: Vec<(Bytes, PushOptions)>,
) -> Result<Vec<JobId>>
where
    C: MqClient + ?Sized,
{
    let mut ids = Vec::with_capacity(jobs.len());
    for (body, options) in jobs {
        ids.push(push_in_tx(client, &mut *conn, topic, body, options).await?);
    }
    Ok(ids)
}
