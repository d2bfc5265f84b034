//! The schema and its versioned migrations, applied on connect.
//!
//! Each migration runs once, in order, in one transaction with the
//! version it brings: concurrent starters wait for each other on a
//! transaction-scoped advisory lock (keyed by the schema's name), so a
//! fleet restarting at once migrates exactly once and none of them sees a
//! half-made schema.

use ezmq_core::Result;
use sqlx::PgPool;

use crate::error::{self, PostgresBackendError};

/// The migrations, version `i + 1` at index `i`; `{s}` is the schema.
const MIGRATIONS: &[&str] = &[
    // 1: jobs, message ids, claims, broadcast groups.
    "CREATE TABLE {s}.jobs (
        seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        queue      text NOT NULL,
        id         text NOT NULL,
        body       bytea NOT NULL,
        headers    jsonb NOT NULL DEFAULT '{}'::jsonb,
        attempt    integer NOT NULL DEFAULT 1,
        visible_at timestamptz NOT NULL DEFAULT now(),
        leased     boolean NOT NULL DEFAULT false,
        deliveries integer NOT NULL DEFAULT 0,
        expires_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX jobs_due ON {s}.jobs (queue, visible_at, seq);
    CREATE UNIQUE INDEX jobs_by_id ON {s}.jobs (queue, id);
    CREATE INDEX jobs_expiring ON {s}.jobs (expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE {s}.message_ids (
        queue      text NOT NULL,
        message_id text NOT NULL,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (queue, message_id)
    );
    CREATE INDEX message_ids_expiring ON {s}.message_ids (expires_at);
    CREATE TABLE {s}.claims (
        key        text PRIMARY KEY,
        token      text NOT NULL,
        expires_at timestamptz NOT NULL
    );
    CREATE INDEX claims_expiring ON {s}.claims (expires_at);
    CREATE TABLE {s}.groups (
        topic        text NOT NULL,
        name         text NOT NULL,
        retention_ms bigint NOT NULL,
        expires_at   timestamptz NOT NULL,
        PRIMARY KEY (topic, name)
    );
    CREATE TABLE {s}.group_members (
        topic      text NOT NULL,
        name       text NOT NULL,
        member     text NOT NULL,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (topic, name, member)
    );",
];

/// The newest version this build knows.
pub(crate) fn latest() -> i32 {
    i32::try_from(MIGRATIONS.len()).unwrap_or(i32::MAX)
}

/// Creates `schema` or brings it to [`latest`]; returns the version it
/// is at. Fails with [`PostgresBackendError::SchemaTooNew`] when another
/// process already migrated it past what this build knows.
///
/// One script in one implicit transaction (the simple query protocol runs
/// a multi-statement string so): the lock, the schema and version table,
/// then each migration in a `DO` block that applies it only when the
/// recorded version is below it.
pub(crate) async fn migrate(pool: &PgPool, schema: &str) -> Result<i32> {
    let mut script = format!(
        "SELECT pg_advisory_xact_lock(hashtext('ezmq-postgres schema {schema}'));
         CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.schema_version (
             version    integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         );"
    );
    for (index, migration) in MIGRATIONS.iter().enumerate() {
        let version = index + 1;
        script.push_str(&format!(
            "DO $ezmq_migration$ BEGIN
             IF (SELECT coalesce(max(version), 0) FROM {schema}.schema_version) < {version} THEN
             {body}
             INSERT INTO {schema}.schema_version (version) VALUES ({version});
             END IF;
             END $ezmq_migration$;",
            body = migration.replace("{s}", schema),
        ));
    }
    sqlx::raw_sql(&script)
        .execute(pool)
        .await
        .map_err(error::statement("migrate"))?;
    let version: i32 = sqlx::query_scalar(&format!(
        "SELECT coalesce(max(version), 0) FROM {schema}.schema_version"
    ))
    .fetch_one(pool)
    .await
    .map_err(error::statement("schema version"))?;
    if version > latest() {
        return Err(PostgresBackendError::SchemaTooNew {
            schema: schema.to_owned(),
            found: version,
            known: latest(),
        }
        .into());
    }
    Ok(version)
}
