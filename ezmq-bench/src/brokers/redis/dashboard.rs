//! The dashboard's overview with 500 topics on Redis: `GET /` of
//! `ezmq-dashboard`'s router (called in process, no HTTP), against the
//! least a page of those counts needs from Redis (a `SCAN` of the
//! topics' keys, then one pipeline of `XLEN` and `ZCARD` per topic).
//! The topics live under a key prefix of the bench's own, deleted at the
//! end.

use std::time::{Duration, Instant};

use ezmq_core::{MqClient, PushOptions};
use ezmq_dashboard::axum::body::Body;
use ezmq_dashboard::axum::http::{Request, StatusCode};
use redis::aio::MultiplexedConnection;
use tower::ServiceExt;

use super::RedisBench;
use crate::scenario::Settings;
use crate::stats::ms;
use crate::table::{verdict, Table};
use crate::BoxResult;

/// Topics on the page.
const TOPICS: usize = 500;
/// Page loads timed per side (the median is reported).
const LOADS: usize = 7;
/// The goal: the overview of 500 topics renders within this.
pub(crate) const GOAL: Duration = Duration::from_secs(1);

impl RedisBench {
    /// Runs the rows; prints the table and adds the goal.
    pub(crate) async fn dashboard(&self, _s: &Settings, goals: &mut Table) -> BoxResult<()> {
        let prefix = format!(
            "benchdash{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let separator = if self.url.contains('?') { '&' } else { '?' };
        let client =
            ezmq_redis::connect_url(&format!("{}{separator}prefix={prefix}", self.url)).await?;
        let filled = Instant::now();
        for n in 0..TOPICS {
            let topic = format!("dash-{n:03}");
            let jobs = (0..=(n % 3))
                .map(|i| (format!("job {i}").into(), PushOptions::new()))
                .collect();
            for pushed in client.push_batch(&topic, jobs).await? {
                pushed?;
            }
        }
        let filled = filled.elapsed();
        let app = ezmq_dashboard::router(client.clone(), ezmq_dashboard::DashboardOptions::new());
        let mut page = Vec::with_capacity(LOADS);
        let mut bytes = 0;
        for _ in 0..LOADS {
            let start = Instant::now();
            let reply = app
                .clone()
                .oneshot(Request::get("/").body(Body::empty())?)
                .await?;
            let status = reply.status();
            let body = ezmq_dashboard::axum::body::to_bytes(reply.into_body(), usize::MAX).await?;
            page.push(start.elapsed());
            if status != StatusCode::OK {
                return Err(format!("GET / answered {status}").into());
            }
            bytes = body.len();
            let rows = String::from_utf8_lossy(&body)
                .matches("<a href=\"/topics/dash-")
                .count();
            if rows != TOPICS {
                return Err(format!("the overview showed {rows} of {TOPICS} topics").into());
            }
        }
        let mut conn = self.dedicated().await?;
        let mut raw = Vec::with_capacity(LOADS);
        for _ in 0..LOADS {
            let start = Instant::now();
            let counted = raw_counts(&mut conn, &prefix).await?;
            raw.push(start.elapsed());
            if counted != TOPICS {
                return Err(format!("the raw read found {counted} of {TOPICS} topics").into());
            }
        }
        drop(app);
        client.shutdown(Duration::from_secs(5)).await?;
        delete_prefix(&mut conn, &prefix).await?;

        let (page, raw) = (median(page), median(raw));
        let mut t = Table::new(
            format!("Redis: the dashboard's overview of {TOPICS} topics (median of {LOADS} loads)"),
            &["read", "time", "vs raw"],
        );
        t.row(vec![
            "raw: SCAN + one pipeline of XLEN, ZCARD per topic".to_owned(),
            format!("{} ms", ms(raw)),
            "1.0×".to_owned(),
        ]);
        t.row(vec![
            format!("ezmq-dashboard GET / ({} KiB of HTML)", bytes / 1024),
            format!("{} ms", ms(page)),
            format!(
                "{:.1}×",
                page.as_secs_f64() / raw.as_secs_f64().max(f64::EPSILON)
            ),
        ]);
        t.note(format!(
            "{TOPICS} topics of 1 to 3 jobs (pushed in {:.1} s) under a key prefix of the bench's own, deleted after. \
             A page reads presence once, lists the topics, then reads each topic's waiting, scheduled, in-flight and \
             dead-lettered counts and its paused flag, 16 topics at a time; the raw row reads only waiting and scheduled, \
             in one round trip.",
            filled.as_secs_f64()
        ));
        println!("{}", t.render());
        goals.row(vec![
            format!(
                "Redis: the dashboard's overview of {TOPICS} topics in under {} s",
                GOAL.as_secs()
            ),
            format!("{} ms", ms(page)),
            verdict(page < GOAL),
        ]);
        Ok(())
    }
}

/// Every topic key under `prefix`, then one pipeline of their counts:
/// how many topics it counted.
async fn raw_counts(conn: &mut MultiplexedConnection, prefix: &str) -> BoxResult<usize> {
    let streams = scan(conn, &format!("{prefix}:{{dash-*}}:s")).await?;
    let mut pipe = redis::pipe();
    for stream in &streams {
        let delayed = format!("{}d", stream.trim_end_matches('s'));
        pipe.cmd("XLEN").arg(stream).cmd("ZCARD").arg(delayed);
    }
    let counts: Vec<u64> = pipe.query_async(conn).await?;
    Ok(counts.len() / 2)
}

/// The keys matching `pattern`.
async fn scan(conn: &mut MultiplexedConnection, pattern: &str) -> BoxResult<Vec<String>> {
    let mut keys = Vec::new();
    let mut cursor = 0_u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        keys.extend(batch);
        if next == 0 {
            return Ok(keys);
        }
        cursor = next;
    }
}

/// Deletes every key under `prefix`.
async fn delete_prefix(conn: &mut MultiplexedConnection, prefix: &str) -> BoxResult<()> {
    for chunk in scan(conn, &format!("{prefix}:*")).await?.chunks(500) {
        let _: u64 = redis::cmd("DEL").arg(chunk).query_async(conn).await?;
    }
    Ok(())
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}
