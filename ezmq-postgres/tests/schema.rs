//! The schema's migrations: many processes starting at once on a new
//! schema migrate it exactly once, and a schema newer than this build is
//! refused. Each test uses a schema of its own, dropped at the end.

use std::time::Duration;

use ezmq_core::{Error, MqClient};
use ezmq_postgres::{PostgresBackendError, PostgresConfig};
use ezmq_test_support::{postgres_url as url, skip_or_require};

/// A pool on the test database, or `None` (after the skip line) when it
/// is not reachable and not required.
async fn admin() -> Option<sqlx::PgPool> {
    match sqlx::PgPool::connect(&url()).await {
        Ok(pool) => Some(pool),
        Err(err) => {
            skip_or_require("postgres", &url(), &err);
            None
        }
    }
}

/// A schema name unique to this run.
fn fresh_schema(label: &str) -> String {
    format!("ezmq_{label}_{}", uuid::Uuid::new_v4().simple())
}

async fn drop_schema(pool: &sqlx::PgPool, schema: &str) {
    sqlx::raw_sql(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(pool)
        .await
        .expect("drop the test schema");
}

#[tokio::test]
async fn concurrent_starters_migrate_once() {
    let Some(pool) = admin().await else { return };
    let schema = fresh_schema("migrate");
    let config = PostgresConfig::new(url()).with_schema(&schema);
    let starters = (0..8).map(|_| ezmq_postgres::connect(config.clone()));
    let clients: Vec<_> = futures::future::join_all(starters)
        .await
        .into_iter()
        .map(|c| c.expect("every concurrent starter connects"))
        .collect();
    let versions: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT version FROM {schema}.schema_version ORDER BY version"
    ))
    .fetch_all(&pool)
    .await
    .expect("versions");
    assert_eq!(versions, [1], "each migration is recorded once");

    // The schema works for all of them.
    let topic = "migrated";
    clients[0].push(topic, "x".into()).await.expect("push");
    let admin_handle = clients[7].admin();
    let len = admin_handle
        .queue_len(&ezmq_core::Topic::new(topic).expect("topic"))
        .await
        .expect("queue_len");
    assert_eq!(len, 1);
    for client in &clients {
        client
            .shutdown(Duration::from_secs(5))
            .await
            .expect("shutdown");
    }
    drop_schema(&pool, &schema).await;
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let Some(pool) = admin().await else { return };
    let schema = fresh_schema("newer");
    let config = PostgresConfig::new(url()).with_schema(&schema);
    let client = ezmq_postgres::connect(config.clone())
        .await
        .expect("first connect creates the schema");
    client
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    sqlx::query(&format!(
        "INSERT INTO {schema}.schema_version (version) VALUES (99)"
    ))
    .execute(&pool)
    .await
    .expect("a later build's version");
    let err = ezmq_postgres::connect(config)
        .await
        .expect_err("a schema at version 99 is refused");
    let Error::Backend { source, retryable } = &err else {
        panic!("expected a backend error, got {err:?}");
    };
    assert!(!retryable, "a configuration problem is not retried: {err}");
    assert!(
        matches!(
            source.downcast_ref::<PostgresBackendError>(),
            Some(PostgresBackendError::SchemaTooNew { found: 99, .. })
        ),
        "{err}"
    );
    drop_schema(&pool, &schema).await;
}
