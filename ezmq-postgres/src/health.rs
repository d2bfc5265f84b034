//! The broker's health report ([`Backend::health`](ezmq_core::spi::Backend::health)):
//! one query of the server's settings and statistics, and the pool's
//! counts.

use std::time::Duration;

use ezmq_core::{BrokerHealth, Error, NodeHealth, Result};

use crate::backend::Inner;

/// Everything the report asks the server, in one round trip.
const HEALTH: &str = "select current_setting('server_version'), pg_is_in_recovery(), \
     extract(epoch from now() - pg_postmaster_start_time())::bigint, \
     pg_size_pretty(pg_database_size(current_database())), \
     (select count(*) from pg_stat_activity where datname = current_database())";

/// `PostgreSQL` with its version, role (primary, or standby while in
/// recovery), ezmq's schema, and this client's pool (open and idle
/// connections of its maximum); one node, `server`, up when the query
/// was answered, with the server's uptime, the database's size and its
/// connections (every client's).
pub(crate) async fn report(inner: &Inner) -> Result<BrokerHealth> {
    inner.ensure_open()?;
    let asked = inner
        .timed(
            "health",
            sqlx::query_as::<_, (String, bool, i64, String, i64)>(HEALTH).fetch_one(&inner.pool),
        )
        .await;
    let pool = format!(
        "{} open, {} idle, at most {}",
        inner.pool.size(),
        inner.pool.num_idle(),
        inner.config.max_connections
    );
    let health = BrokerHealth::new("PostgreSQL");
    match asked {
        Ok((version, in_recovery, uptime, size, connections)) => Ok(health
            .with_fact("version", version)
            .with_fact("role", if in_recovery { "standby" } else { "primary" })
            .with_fact("schema", &inner.config.schema)
            .with_fact("pool", pool)
            .with_node(
                NodeHealth::up("server")
                    .with_uptime(Duration::from_secs(u64::try_from(uptime).unwrap_or(0)))
                    .with_fact("database size", size)
                    .with_fact("connections", connections),
            )),
        Err(Error::Shutdown) => Err(Error::Shutdown),
        Err(_) => Ok(health
            .with_fact("schema", &inner.config.schema)
            .with_fact("pool", pool)
            .with_node(NodeHealth::down("server"))),
    }
}
