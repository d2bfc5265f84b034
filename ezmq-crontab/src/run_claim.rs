//! The overlap policy across processes: while a run of a crontab goes, its
//! participant holds the crontab's *run claim*
//! (`__ezmq|cron-run|<name>`, an [exclusive claim](ezmq_core::spi::ExclusiveClaim)
//! under `<tick> <host>/<pid>`), given back when the handler ends and
//! ending by itself after [`CrontabOptions::max_run`](crate::CrontabOptions::max_run).
//! The winner of a later tick takes it before running; while another run
//! holds it, the tick is skipped — unless the holder's process is gone:
//! a claim whose tick is older than
//! [`PRESENCE_EXPIRY`] and whose
//! holder no live participant runs this crontab (its process was killed
//! mid-run, so nobody gives the claim back) is released and taken over,
//! on every backend with presence (all of ezmq's). Without it, such a
//! claim ends after `max_run`.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ezmq_core::presence::{self, PRESENCE_EXPIRY};
use ezmq_core::spi::{Backend, Capability, ClaimOutcome};
use ezmq_core::{Error, Result, Topic};
use tracing::{debug, warn};

use crate::announce::PRESENCE_KIND;

/// The `kind` of the run claim's name.
const KIND: &str = "cron-run";

/// How many times a run claim's give-back is tried.
const GIVE_BACK_TRIES: u32 = 5;

/// The wait before the second try of a give-back, doubled before each
/// next one (0.1 + 0.2 + 0.4 + 0.8 s: a broker's failover has time to end).
const GIVE_BACK_BACKOFF: Duration = Duration::from_millis(100);

/// A run claim this participant holds.
#[derive(Debug)]
pub(crate) struct RunClaim {
    key: Topic,
    token: String,
}

/// What taking the run claim found.
pub(crate) enum Taken {
    /// Ours, until given back.
    Ours(RunClaim),
    /// Another run holds it: its tick and participant, when known.
    Busy(Option<String>),
}

/// Takes crontab `name`'s run claim for the run of `tick` by
/// `participant`, held for at most `max_run`.
pub(crate) async fn take(
    backend: &dyn Backend,
    name: &str,
    tick: DateTime<Utc>,
    participant: &str,
    max_run: Duration,
) -> Result<Taken> {
    let key = Topic::internal(KIND, &[name])?;
    let claims = backend.exclusive_claim().ok_or(Error::Unsupported {
        backend: backend.name(),
        capability: Capability::ExclusiveClaim,
    })?;
    let token = format!("{} {participant}", tick.to_rfc3339());
    Ok(match claims.claim(&key, &token, max_run).await? {
        ClaimOutcome::Won => Taken::Ours(RunClaim { key, token }),
        ClaimOutcome::Held(Some(holder)) if abandoned(backend, name, &holder).await => {
            warn!(cron = %name, holder = %holder,
                "the run claim's holder is gone (its process left without giving it back); taking it over");
            claims.release(&key, &holder).await?;
            match claims.claim(&key, &token, max_run).await? {
                ClaimOutcome::Won => Taken::Ours(RunClaim { key, token }),
                ClaimOutcome::Held(holder) => Taken::Busy(holder),
            }
        }
        ClaimOutcome::Held(holder) => Taken::Busy(holder),
    })
}

/// True when run-claim token `holder` (`<tick> <host>/<pid>`) names a
/// tick older than [`PRESENCE_EXPIRY`] and a process that no live
/// participant says runs crontab `name`. False whenever that cannot be
/// told (no presence here, an unreadable token, a failed read).
async fn abandoned(backend: &dyn Backend, name: &str, holder: &str) -> bool {
    if !presence::available(backend) {
        return false;
    }
    let Some((tick, process)) = holder.split_once(' ') else {
        return false;
    };
    let Ok(tick) = DateTime::parse_from_rfc3339(tick) else {
        return false;
    };
    let age = Utc::now().signed_duration_since(tick.with_timezone(&Utc));
    if age.to_std().map_or(true, |age| age < PRESENCE_EXPIRY) {
        return false;
    }
    match presence::live(backend).await {
        Ok(live) => !live
            .iter()
            .any(|p| p.process == process && p.has_entry(PRESENCE_KIND, name)),
        Err(e) => {
            debug!(cron = %name, cause = %e, "could not read presence; the run claim stays");
            false
        }
    }
}

impl RunClaim {
    /// Gives the claim back once the run ended, retrying a failure that
    /// may pass ([`Error::is_retryable`]) [`GIVE_BACK_TRIES`] times; a
    /// claim that could not be given back is logged (it then ends after
    /// `max_run`, and the ticks until then are skipped).
    pub(crate) async fn give_back(self, backend: &Arc<dyn Backend>, name: &str) {
        let Some(claims) = backend.exclusive_claim() else {
            return;
        };
        let mut backoff = GIVE_BACK_BACKOFF;
        for attempt in 1..=GIVE_BACK_TRIES {
            match claims.release(&self.key, &self.token).await {
                Ok(_) => return,
                Err(err) if err.is_retryable() && attempt < GIVE_BACK_TRIES => {
                    debug!(cron = %name, attempt, cause = %err, "could not give the run claim back; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
                Err(err) => {
                    warn!(cron = %name, attempt, cause = %err,
                        "could not give the run claim back; the next ticks are skipped until max_run ends");
                    return;
                }
            }
        }
    }
}
