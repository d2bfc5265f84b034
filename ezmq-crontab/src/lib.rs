//! # ezmq-crontab
//!
//! Distributed cron for ezmq: any number of clients, in any number of
//! processes, register the same named crontab; every tick runs once across
//! all of them. Coordination goes through the broker only (the backend's
//! [`ExclusiveClaim`](ezmq_core::spi::ExclusiveClaim) capability): no
//! leader, no membership, nothing to configure.
//!
//! [`CrontabExt`] works on every [`MqClient`](ezmq_core::MqClient) — an
//! `ezmq_core::Client` from any backend crate, or an `Arc<dyn MqClient>` —
//! whose backend reports
//! [`Capability::ExclusiveClaim`](ezmq_core::spi::Capability::ExclusiveClaim);
//! on any other backend `add_crontab` fails at once with
//! [`Error::Unsupported`](ezmq_core::Error::Unsupported). What each backend
//! does behind the claim:
//!
//! | Backend | Claim |
//! |---|---|
//! | Disque | `ADDJOB <key> ... MAXLEN 1 TTL <hold>` on the reachable node with the lowest id: the first caller stores the job, the others get `-MAXLEN` |
//! | Redis | `SET <key> NX PX <hold>` |
//! | RabbitMQ | publish to a queue declared with `x-max-length 1` and `overflow reject-publish` that expires after the hold |
//!
//! ```no_run
//! # async fn demo(client: ezmq_core::Client) -> ezmq_core::Result<()> {
//! use std::time::Duration;
//! use chrono::{DateTime, Utc};
//! use ezmq_core::MqClient;
//! use ezmq_crontab::{CrontabExt, CrontabOptions, MissedTicks};
//!
//! client
//!     .add_crontab("report", "0/10 * * * * *", |tick: DateTime<Utc>| async move {
//!         println!("report for {tick}");
//!         Ok::<(), std::io::Error>(())
//!     })
//!     .await?;
//! client
//!     .add_crontab_with(
//!         "nightly",
//!         "30 2 * * *",
//!         CrontabOptions::default()
//!             .with_timezone(chrono_tz::Europe::Paris)
//!             .with_missed_ticks(MissedTicks::RunOnce),
//!         |tick: DateTime<Utc>| async move { Ok::<(), std::io::Error>(()) },
//!     )
//!     .await?;
//! for info in client.crontabs() {
//!     println!("{} `{}` next at {:?}", info.name, info.spec, info.next_tick);
//! }
//! client.remove_crontab("report").await;
//! client.shutdown(Duration::from_secs(10)).await?;
//! # Ok(()) }
//! ```
//!
//! ## How it works
//!
//! Each participant computes the ticks from the expression. At each tick
//! it calls `try_claim("__ezmq|cron|<name>|<tick unix secs>", hold)`;
//! exactly one caller wins while the claim is held and runs the handler.
//!
//! - `hold` = two periods (the time to the following tick), at least
//!   [`MIN_HOLD`] (60 s), at most [`MAX_HOLD`] (8 days). Clock skew between
//!   hosts below `hold` minus the claim window (so at least 30 s) cannot
//!   produce a duplicate: a participant whose clock is late still finds the
//!   claim held.
//! - The claim window: a participant claims a tick until half a period
//!   after it (at least 1 s, at most [`MAX_CLAIM_WINDOW`], 30 s), retrying
//!   failed claim calls within that window. A participant that wakes up
//!   later than that, or whose claim calls keep failing (broker down),
//!   logs and skips the tick.
//!
//! ## The registry (`ezmq cron list`)
//!
//! Each scheduler also announces its crontab — name, expression, time
//! zone, the last tick it ran — on the internal topic
//! `__ezmq|cron-registry`, using only the core calls and peek; any client
//! reads the merged view with [`announced_crontabs`]. It lists a crontab
//! while a live process runs it: each scheduler registers its crontab in
//! its client's presence ([`ezmq_core::presence`]), so a crontab leaves the
//! list at once when its processes stop, within 15 s when they die.
//! Backends without peek (RabbitMQ) do not announce: there the list comes
//! from presence alone, without the last tick. See `src/announce.rs` for the
//! details.
//!
//! ## Guarantees
//!
//! - **No failures:** each tick runs exactly once, on one participant.
//! - **A participant dies or shuts down:** graceful shutdown loses nothing
//!   (a claim call in progress completes and a won tick still runs; the
//!   shutdown waits for runs in progress). A participant that dies after
//!   winning a claim cuts that tick's run short and nobody repeats it (the
//!   others see it claimed): at most one missed tick, the one in progress.
//! - **A broker node dies:** a claim lives on one node. If that node dies
//!   or becomes unreachable during a tick's claim window, participants that
//!   claim after that may win again elsewhere: at most one duplicate, for
//!   the tick whose window straddles the failure. A claim call that fails
//!   or times out after the broker executed it makes that tick missed
//!   (retries find it claimed): at most one missed tick per failure.
//! - **Nobody running:** ticks are not run later, except the most recent
//!   one with [`MissedTicks::RunOnce`].
//! - **Slow handlers:** a tick is skipped while the run of an earlier tick
//!   of the same crontab is still going in any process (unless
//!   [`CrontabOptions::allow_overlap`]): the busy client does not claim it,
//!   and the participant that wins it skips it while the crontab's run
//!   claim is held (see [`CrontabOptions::max_run`]).
//!
//! Every task is spawned on the client's runtime and stops with the client's
//! shutdown token; shutdown lets handlers in progress finish (within the
//! shutdown grace period). A crontab holds the backend, never the client,
//! so it does not keep its client alive.
//!
//! ## Expressions
//!
//! | Form | Example | Day of week |
//! |---|---|---|
//! | 5 fields `min hour dom month dow` | `30 2 * * 1-5` | `0`/`7` = Sunday, `1` = Monday … `6` = Saturday, or `SUN`…`SAT` |
//! | 6 fields `sec min hour dom month dow` | `0 30 2 * * 1-5` | the same |
//! | 7 fields (plus `year`) | `0 0 12 1 1 * 2030` | the same |
//! | shorthands | `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly` | — |
//!
//! An out-of-range value is reported with its position in the user's own
//! expression (`field 1 (minute) value 61 is out of range 0-59`);
//! `@every 5s` is not supported and the error says what to write instead.

mod announce;
mod ext;
mod history;
mod options;
mod registry;
mod run_claim;
mod scheduler;
mod spec;
mod telemetry;
mod timing;

pub use announce::{announced_crontabs, registry_topic, CrontabAnnouncement, CrontabStatus};
pub use chrono_tz::Tz;
pub use ext::CrontabExt;
pub use history::{cron_history, CronRun, RunOutcome, RECORD_TTL};
pub use options::{CrontabOptions, MissedTicks, DEFAULT_HISTORY, DEFAULT_MAX_RUN};
pub use registry::CrontabInfo;
pub use timing::{MAX_CLAIM_WINDOW, MAX_HOLD, MIN_HOLD};
