//! `CrontabExt`: crontab methods on every [`MqClient`] whose backend can
//! claim.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use ezmq_core::presence::PresenceEntry;
use ezmq_core::{BoxError, MqClient, Result};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::announce::{Announcer, PRESENCE_KIND, SPEC_DETAIL, TIMEZONE_DETAIL};
use crate::options::CrontabOptions;
use crate::registry::{CrontabInfo, CrontabRegistry, Entry};
use crate::scheduler::{claim_key, BoxHandler, Scheduler};
use crate::spec::CronSpec;

/// Distributed cron on every [`MqClient`] (an `ezmq_core::Client`, an
/// `Arc<dyn MqClient>`, ...) whose backend reports the
/// [`ExclusiveClaim`](ezmq_core::spi::Capability::ExclusiveClaim)
/// capability. Bring it into scope with `use ezmq_crontab::CrontabExt`.
///
/// Every participant (client, in any process) that registers the same name
/// with the same expression computes the same ticks; at each tick they race
/// for the tick's claim in the broker and only the winner runs the handler.
/// See the crate documentation for the guarantees.
///
/// ```no_run
/// # async fn demo(client: std::sync::Arc<dyn ezmq_core::MqClient>) -> ezmq_core::Result<()> {
/// use chrono::{DateTime, Utc};
/// use ezmq_crontab::CrontabExt;
///
/// client
///     .add_crontab("report", "0/10 * * * * *", |tick: DateTime<Utc>| async move {
///         println!("report for {tick}");
///         Ok::<(), std::io::Error>(())
///     })
///     .await?;
/// # Ok(()) }
/// ```
#[async_trait]
pub trait CrontabExt {
    /// Registers crontab `name` with default [`CrontabOptions`] (UTC, skip
    /// missed ticks, no overlap).
    ///
    /// `spec` is a cron expression: 5 fields `min hour day-of-month month
    /// day-of-week`, 6 fields with seconds first, 7 with a year last, or
    /// `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`. Days of week
    /// are numbered the Unix way in every form: `0` or `7` = Sunday, `1` =
    /// Monday ... `6` = Saturday; names (`MON-FRI`) work too.
    ///
    /// The handler receives the scheduled tick time (not the time it
    /// starts), always in UTC. An error or a panic of the handler is logged
    /// with the tick and the schedule goes on.
    ///
    /// Fails with [`Error::InvalidOption`](ezmq_core::Error::InvalidOption)
    /// for an invalid expression (option `spec`) or when this client already
    /// has a crontab of that name (option `name`), with
    /// [`Error::InvalidTopic`](ezmq_core::Error::InvalidTopic) for a name
    /// that is not a valid topic name, with
    /// [`Error::Unsupported`](ezmq_core::Error::Unsupported) when the
    /// backend has no exclusive claim, and with
    /// [`Error::Shutdown`](ezmq_core::Error::Shutdown) after shutdown.
    async fn add_crontab<F, Fut, E>(&self, name: &str, spec: &str, handler: F) -> Result<()>
    where
        F: Fn(DateTime<Utc>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static;

    /// [`CrontabExt::add_crontab`] with explicit options.
    async fn add_crontab_with<F, Fut, E>(
        &self,
        name: &str,
        spec: &str,
        options: CrontabOptions,
        handler: F,
    ) -> Result<()>
    where
        F: Fn(DateTime<Utc>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static;

    /// Stops crontab `name` in this client (other participants go on).
    /// Returns `false` when this client has no crontab of that name.
    ///
    /// Returns once this client starts no more runs of it. A run in
    /// progress is not awaited: it finishes in the background (client
    /// shutdown waits for it), so a handler may remove its own crontab.
    async fn remove_crontab(&self, name: &str) -> bool;

    /// This client's crontabs, sorted by name, with their next tick.
    fn crontabs(&self) -> Vec<CrontabInfo>;
}

#[async_trait]
impl<C: MqClient + ?Sized> CrontabExt for C {
    async fn add_crontab<F, Fut, E>(&self, name: &str, spec: &str, handler: F) -> Result<()>
    where
        F: Fn(DateTime<Utc>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.add_crontab_with(name, spec, CrontabOptions::default(), handler)
            .await
    }

    async fn add_crontab_with<F, Fut, E>(
        &self,
        name: &str,
        spec: &str,
        options: CrontabOptions,
        handler: F,
    ) -> Result<()>
    where
        F: Fn(DateTime<Utc>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        let runtime = self.runtime();
        runtime.ensure_open()?;
        // Fails with `Unsupported` now rather than at the first tick.
        runtime.exclusive_claim()?;
        options.validate()?;
        // The name is part of every claim key: check it once here.
        claim_key(name, Utc::now())?;
        let spec = Arc::new(CronSpec::parse(spec, options.timezone)?);
        let handler: BoxHandler = Arc::new(move |tick| {
            let run = handler(tick);
            Box::pin(async move { run.await.map_err(Into::into) })
        });

        let cancel = runtime.shutdown_token();
        let stopped = CancellationToken::new();
        let registry = runtime.extension(CrontabRegistry::default);
        registry.insert(
            name,
            Entry {
                spec: Arc::clone(&spec),
                options: options.clone(),
                cancel: cancel.clone(),
                stopped: stopped.clone(),
            },
        )?;
        info!(cron = name, spec = spec.source(), timezone = %options.timezone,
            "crontab registered");
        let name: Arc<str> = Arc::from(name);
        let presence = runtime.presence_entry(
            PresenceEntry::new(PRESENCE_KIND, &*name)
                .with_detail(SPEC_DETAIL, spec.source())
                .with_detail(TIMEZONE_DETAIL, options.timezone.name()),
        );
        let (announce, ran) = tokio::sync::watch::channel(None);
        let announcer = Announcer::new(
            Arc::clone(runtime.backend()),
            Arc::clone(&name),
            Arc::clone(&spec),
            options.timezone,
        );
        runtime.spawn(announcer.run(cancel.clone(), ran));
        let scheduler = Scheduler {
            backend: Arc::clone(runtime.backend()),
            name,
            spec,
            options,
            handler,
            cancel,
            announce,
            stopped: Some(stopped.drop_guard()),
            participant: crate::announce::participant(),
            presence,
        };
        runtime.spawn(scheduler.run());
        Ok(())
    }

    async fn remove_crontab(&self, name: &str) -> bool {
        let registry = self.runtime().extension(CrontabRegistry::default);
        let Some(entry) = registry.remove(name) else {
            return false;
        };
        entry.cancel.cancel();
        entry.stopped.cancelled().await;
        info!(cron = name, "crontab removed");
        true
    }

    fn crontabs(&self) -> Vec<CrontabInfo> {
        self.runtime().extension(CrontabRegistry::default).list()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Arc;

    use ezmq_core::spi::Capability;
    use ezmq_core::{Client, ClientConfig, Error, MqClient};
    use ezmq_test_support::BareBackend;

    use super::*;

    #[tokio::test]
    async fn registration_fails_without_exclusive_claim() {
        let client: Arc<dyn MqClient> = Arc::new(Client::new(BareBackend, ClientConfig::default()));
        let err = client
            .add_crontab("nightly", "0 0 * * *", |_tick: DateTime<Utc>| async {
                Ok::<(), Infallible>(())
            })
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Unsupported {
                    backend: "bare",
                    capability: Capability::ExclusiveClaim
                }
            ),
            "{err:?}"
        );
        assert!(client.crontabs().is_empty());
    }
}
