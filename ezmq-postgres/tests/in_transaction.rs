//! Pushes inside the caller's transaction, with a real business table: a
//! rolled-back push leaves no job, a committed one is delivered (and not
//! before the commit), and what cannot join a transaction is refused.

use std::time::Duration;

use ezmq_core::{
    Client, ClientConfig, ConsumeOptions, Error, Job, MqClient, MqClientExt, PushOptions, Topic,
};
use ezmq_postgres::{push_in_tx, push_json_in_tx, PostgresConfig};
use ezmq_test_support::{postgres_url as url, skip_or_require, MemoryBackend};
use tokio::sync::mpsc;

/// Bound for what should happen at once.
const SOON: Duration = Duration::from_secs(30);
/// A check that something does not happen.
const QUIET: Duration = Duration::from_millis(500);

/// The test database's pool and a client in the test schema, or `None`
/// after the skip line.
async fn setup() -> Option<(sqlx::PgPool, Client)> {
    let pool = match sqlx::PgPool::connect(&url()).await {
        Ok(pool) => pool,
        Err(err) => {
            skip_or_require("postgres", &url(), &err);
            return None;
        }
    };
    let client = ezmq_postgres::connect(PostgresConfig::new(url()).with_schema("ezmq_test"))
        .await
        .expect("client");
    Some((pool, client))
}

/// A business table of this test's own, dropped at the end.
async fn orders_table(pool: &sqlx::PgPool) -> String {
    let table = format!("orders_{}", uuid::Uuid::new_v4().simple());
    sqlx::raw_sql(&format!(
        "CREATE TABLE {table} (id bigint PRIMARY KEY, total bigint NOT NULL)"
    ))
    .execute(pool)
    .await
    .expect("create the business table");
    table
}

#[tokio::test]
async fn a_job_exists_if_and_only_if_its_transaction_commits() {
    let Some((pool, client)) = setup().await else {
        return;
    };
    let table = orders_table(&pool).await;
    let topic = format!("in-tx.{}", uuid::Uuid::new_v4().simple());
    let (tx_jobs, mut jobs) = mpsc::unbounded_channel::<String>();
    client
        .add_consume_listener_with(
            &topic,
            ConsumeOptions::new().with_concurrency(1),
            move |job: Job| {
                let tx_jobs = tx_jobs.clone();
                async move {
                    let _ = tx_jobs.send(String::from_utf8_lossy(job.body()).into_owned());
                    Ok::<(), std::convert::Infallible>(())
                }
            },
        )
        .await
        .expect("listener");

    // Rolled back: neither the order nor the job.
    let mut tx = pool.begin().await.expect("begin");
    sqlx::query(&format!("INSERT INTO {table} (id, total) VALUES (1, 10)"))
        .execute(&mut *tx)
        .await
        .expect("order 1");
    push_in_tx(
        &client,
        &mut tx,
        &topic,
        "order-1".into(),
        PushOptions::new(),
    )
    .await
    .expect("push in the transaction");
    tx.rollback().await.expect("rollback");
    client.push(&topic, "marker".into()).await.expect("marker");
    let first = tokio::time::timeout(SOON, jobs.recv())
        .await
        .expect("the marker")
        .expect("open");
    assert_eq!(first, "marker", "a rolled-back push left a job");

    // Committed, from a spawned task (the future is Send): not delivered
    // before the commit, delivered after it, beside its order.
    let (pool2, client2, topic2, table2) =
        (pool.clone(), client.clone(), topic.clone(), table.clone());
    let (committing, commit) = tokio::sync::oneshot::channel::<()>();
    let (pushed, was_pushed) = tokio::sync::oneshot::channel::<ezmq_core::JobId>();
    let writer = tokio::spawn(async move {
        let mut tx = pool2.begin().await.expect("begin");
        sqlx::query(&format!("INSERT INTO {table2} (id, total) VALUES (2, 20)"))
            .execute(&mut *tx)
            .await
            .expect("order 2");
        let id = push_json_in_tx(
            &client2,
            &mut tx,
            &topic2,
            &serde_json::json!({"order": 2}),
            PushOptions::new(),
        )
        .await
        .expect("push in the transaction");
        let _ = pushed.send(id);
        commit.await.expect("told to commit");
        tx.commit().await.expect("commit");
    });
    let id = was_pushed.await.expect("pushed");
    let admin = client.admin();
    let name = Topic::new(&topic).expect("topic");
    assert!(
        tokio::time::timeout(QUIET, jobs.recv()).await.is_err(),
        "a job was delivered before its transaction committed"
    );
    assert!(
        admin.job(&name, &id).await.expect("job").is_none(),
        "another connection sees the uncommitted job"
    );
    committing.send(()).expect("writer waits");
    writer.await.expect("writer");
    let delivered = tokio::time::timeout(SOON, jobs.recv())
        .await
        .expect("the committed job")
        .expect("open");
    assert_eq!(delivered, r#"{"order":2}"#);
    let orders: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(&pool)
        .await
        .expect("orders");
    assert_eq!(orders, 1, "only the committed order is there");

    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    sqlx::raw_sql(&format!("DROP TABLE {table}"))
        .execute(&pool)
        .await
        .expect("drop");
}

#[tokio::test]
async fn what_cannot_join_a_transaction_is_refused() {
    let Some((pool, client)) = setup().await else {
        return;
    };
    let mut conn = pool.acquire().await.expect("a connection");
    let err = push_in_tx(
        &client,
        &mut conn,
        "in-tx.unique",
        "x".into(),
        PushOptions::new().with_unique_key("k", Duration::from_secs(60)),
    )
    .await
    .expect_err("a unique key is a claim outside the transaction");
    assert!(
        matches!(
            err,
            Error::InvalidOption {
                option: "unique",
                ..
            }
        ),
        "{err}"
    );

    let other = Client::new(MemoryBackend::new(), ClientConfig::default());
    let err = push_in_tx(
        &other,
        &mut conn,
        "in-tx.other",
        "x".into(),
        PushOptions::new(),
    )
    .await
    .expect_err("another backend's client");
    assert!(
        matches!(
            err,
            Error::InvalidOption {
                option: "client",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("PostgreSQL"), "{err}");
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
