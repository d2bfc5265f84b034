//! `ezmq dashboard` with no broker URL: an embedded server filled with a
//! small shop (waiting, scheduled and dead-lettered jobs, listeners, a
//! broadcast group, a crontab), so that the dashboard has something to
//! show with nothing installed.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ezmq::prelude::*;
use ezmq::{handler_fn, Client, ConsumeOptions, Job, Permanent, PushOptions};
use ezmq_disque_server::{EmbeddedDisque, ServerConfig};

use crate::exit::{CliError, CliResult};

/// The running demo: its server and the client whose listeners and
/// crontab fill it.
pub(crate) struct Demo {
    pub(crate) server: EmbeddedDisque,
    pub(crate) client: Client,
}

fn failed(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Usage(format!("the demo could not {what}: {e}"))
}

/// Starts the server on a free loopback port and fills it.
pub(crate) async fn start() -> CliResult<Demo> {
    let server = EmbeddedDisque::start(ServerConfig::default().with_port(0))
        .await
        .map_err(|e| failed("start the embedded server", e))?;
    let url = format!("disque://{}", server.addr());
    let client = ezmq::connect_url(&url)
        .await
        .map_err(|e| failed("connect to the embedded server", e))?;
    fill(&client)
        .await
        .map_err(|e| failed("fill the embedded server", e))?;
    Ok(Demo { server, client })
}

async fn fill(client: &Client) -> ezmq::Result<()> {
    // Payments: declined cards end as dead letters at once.
    client
        .add_consume_listener_with(
            "payments",
            ConsumeOptions::new().with_max_attempts(1),
            |job: Job| async move {
                if job.body().starts_with(b"{\"card\":\"declined") {
                    Err(Permanent::new(std::io::Error::other("card declined")))
                } else {
                    Ok(())
                }
            },
        )
        .await?;
    for body in [
        r#"{"card":"declined","order":7}"#,
        r#"{"card":"ok","order":8}"#,
        r#"{"card":"declined","order":9}"#,
    ] {
        client.push("payments", body.into()).await?;
    }
    // Orders: waiting (nobody consumes them here) and one scheduled.
    for id in 1..=5 {
        client
            .push_with(
                "orders",
                format!(r#"{{"id":{id},"total":{}}}"#, id * 10).into(),
                PushOptions::new().with_header("tenant", "acme"),
            )
            .await?;
    }
    client
        .push_with(
            "orders",
            r#"{"id":6,"total":60}"#.into(),
            PushOptions::new().with_delay(Duration::from_secs(3600)),
        )
        .await?;
    // Emails: a busy listener; order events: a broadcast group.
    client
        .add_consume_listener_with(
            "emails",
            ConsumeOptions::new().with_concurrency(8),
            |_job: Job| async { Ok::<(), std::io::Error>(()) },
        )
        .await?;
    client
        .add_broadcast_listener(
            "order-events",
            "billing",
            Arc::new(handler_fn(|_job: Job| async {
                Ok::<(), std::io::Error>(())
            })),
        )
        .await?;
    client
        .add_crontab("report", "0/10 * * * * *", |_tick: DateTime<Utc>| async {
            Ok::<(), std::io::Error>(())
        })
        .await?;
    Ok(())
}
