//! A client's announcer task: writes its [`Participant`] record at once, on
//! every change and every heartbeat, compacts the topic about once a
//! minute, and writes a last "gone" record at shutdown.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::{
    newest_per_participant, now_ms, presence_topic, unix_ms, ListenerPresence, Participant,
    Presence, PRESENCE_EXPIRY, PRESENCE_HEARTBEAT,
};
use crate::error::Result;
use crate::listener::Registry;
use crate::push_options::PushOptions;
use crate::spi::{compact_topic, Backend};

/// How often one participant compacts the topic at most.
const COMPACT_EVERY: Duration = Duration::from_secs(60);
/// Records the topic may hold before a participant compacts it: well
/// under what a read takes ([`READ_LIMIT`](super::READ_LIMIT)).
const COMPACT_ABOVE: u64 = 200;
/// The longest a write or a compaction may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest the last record may take at shutdown.
const GONE_TIMEOUT: Duration = Duration::from_secs(2);

/// Announces until `shutdown`, then says the client is gone. Never fails:
/// problems are logged at debug (presence is best effort).
pub(crate) async fn run(
    presence: Arc<Presence>,
    listeners: Arc<Registry>,
    backend: Arc<dyn Backend>,
    shutdown: CancellationToken,
) {
    let announcer = Announcer {
        presence,
        listeners,
        backend,
    };
    let mut compacted_at: Option<Instant> = None;
    loop {
        let record = announcer.record(false);
        match tokio::time::timeout(CALL_TIMEOUT, announcer.publish(&record)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => debug!(cause = %e, "could not announce presence"),
            Err(_) => debug!("announcing presence timed out"),
        }
        let own_store = announcer.backend.presence_store().is_some();
        if !own_store && compacted_at.is_none_or(|at| at.elapsed() >= COMPACT_EVERY) {
            compacted_at = Some(Instant::now());
            match tokio::time::timeout(CALL_TIMEOUT, announcer.compact_if_large()).await {
                Ok(Ok(Some(kept))) => debug!(kept, "compacted the presence topic"),
                Ok(Ok(None)) => {}
                Ok(Err(e)) => debug!(cause = %e, "could not compact the presence topic"),
                Err(_) => debug!("compacting the presence topic timed out"),
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = announcer.presence.next_change() => {}
            () = tokio::time::sleep(PRESENCE_HEARTBEAT) => {}
        }
    }
    let gone = announcer.record(true);
    if tokio::time::timeout(GONE_TIMEOUT, announcer.publish(&gone))
        .await
        .is_err()
    {
        debug!("announcing the client gone timed out");
    }
}

struct Announcer {
    presence: Arc<Presence>,
    listeners: Arc<Registry>,
    backend: Arc<dyn Backend>,
}

impl Announcer {
    /// The client's record as of now.
    fn record(&self, gone: bool) -> Participant {
        let now = now_ms();
        let expiry = i64::try_from(PRESENCE_EXPIRY.as_millis()).unwrap_or(i64::MAX);
        let (listeners, entries) = if gone {
            (Vec::new(), Vec::new())
        } else {
            let listeners = self
                .listeners
                .running()
                .iter()
                .filter(|control| !control.is_stopping())
                .map(|control| ListenerPresence {
                    topic: control.source().topic().to_string(),
                    group: control.source().group().map(ToString::to_string),
                    concurrency: control.concurrency(),
                    in_flight: control.in_flight(),
                    succeeded: control.succeeded(),
                    failed: control.failed(),
                    paused: control.is_paused(),
                    started_at_ms: unix_ms(control.started_at()),
                })
                .collect();
            (listeners, self.presence.entries())
        };
        Participant {
            id: self.presence.id().to_owned(),
            process: self.presence.process().to_owned(),
            started_at_ms: self.presence.started_at_ms(),
            announced_at_ms: now,
            expires_at_ms: now.saturating_add(expiry),
            gone,
            listeners,
            entries,
        }
    }

    async fn publish(&self, record: &Participant) -> Result<()> {
        let body = serde_json::to_vec(record)?;
        if let Some(store) = self.backend.presence_store() {
            return store.write(body.into(), PRESENCE_EXPIRY).await;
        }
        self.backend
            .publish(&presence_topic()?, body.into(), &ttl_of(record))
            .await
            .map(drop)
    }

    /// Compacts the topic when it holds more than [`COMPACT_ABOVE`]
    /// records (or when the broker cannot count them): most clients then
    /// never take the topic's records, which on some brokers means joining
    /// a consumer group. Returns how many were kept, `None` when it did not
    /// compact.
    async fn compact_if_large(&self) -> Result<Option<usize>> {
        if let Some(stats) = self.backend.queue_stats() {
            if stats.queue_len(&presence_topic()?).await? <= COMPACT_ABOVE {
                return Ok(None);
            }
        }
        self.compact().await.map(Some)
    }

    /// Publishes again the newest unexpired record per participant,
    /// drops the rest. Returns how many were kept.
    async fn compact(&self) -> Result<usize> {
        let now = now_ms();
        compact_topic(self.backend.as_ref(), &presence_topic()?, |jobs| {
            let records = jobs.iter().filter_map(|job| job.json().ok()).collect();
            newest_per_participant(records)
                .into_iter()
                .filter(|p| p.expires_at_ms > now)
                .filter_map(|p| Some((serde_json::to_vec(&p).ok()?.into(), ttl_of(&p))))
                .collect()
        })
        .await
    }
}

/// A record's push options: its ttl is what is left of its validity.
fn ttl_of(record: &Participant) -> PushOptions {
    let left = u64::try_from(record.expires_at_ms - now_ms()).unwrap_or(0);
    PushOptions::default().with_ttl(Duration::from_millis(left.max(1_000)))
}
