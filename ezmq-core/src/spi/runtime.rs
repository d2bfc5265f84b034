//! The client's runtime: what feature crates build on.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client::ClientConfig;
use crate::consume_options::ConsumeOptions;
use crate::error::{Error, Result};
use crate::extensions::Extensions;
use crate::handler::Handler;
use crate::job::JobId;
use crate::lane_mark::LaneMarks;
use crate::listener::{self, ListenerHandle};
use crate::presence::{self, Presence, PresenceEntry, PresenceGuard};
use crate::priority::Priority;
use crate::producer;
use crate::push_options::PushOptions;
use crate::telemetry::Telemetry;
use crate::topic::Topic;

use super::backend::Backend;
use super::capability::Capability;
use super::claim::ExclusiveClaim;
use super::fan_out::FanOut;
use super::reply::ReplyChannel;
use super::source::Source;

/// The state one [`Client`](crate::Client) and its clones share: the
/// backend, background tasks, listeners, per-feature state. Feature crates
/// reach it through [`MqClient::runtime`](crate::MqClient::runtime);
/// applications have no use for it.
pub struct Runtime {
    backend: Arc<dyn Backend>,
    config: ClientConfig,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    closed: AtomicBool,
    extensions: Extensions,
    listeners: Arc<listener::Registry>,
    /// Who this client is on the broker, and what it registered there.
    presence: Arc<Presence>,
    /// Shared with the listeners (their dead-letter pushes are sends).
    telemetry: Arc<Telemetry>,
}

impl Drop for Runtime {
    // The last client clone gone: stop every background task.
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("backend", &self.backend)
            .field("config", &self.config)
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl Runtime {
    pub(crate) fn new(backend: Arc<dyn Backend>, config: ClientConfig) -> Self {
        Runtime {
            telemetry: Arc::new(Telemetry::new(backend.name())),
            backend,
            config,
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            closed: AtomicBool::new(false),
            extensions: Extensions::default(),
            listeners: Arc::default(),
            presence: Arc::new(Presence::new()),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The backend as its concrete type `B`, when it is one: how a backend
    /// crate offers calls only it has (PostgreSQL's push inside the
    /// caller's transaction) on any client, through an extension trait of
    /// its own, while [`Client`](crate::Client) stays one type.
    pub fn backend_as<B: Backend>(&self) -> Option<&B> {
        let any: &dyn std::any::Any = &*self.backend;
        any.downcast_ref::<B>()
    }

    /// The client's metric handles (see [`telemetry`](crate::telemetry)).
    pub fn telemetry(&self) -> &Arc<Telemetry> {
        &self.telemetry
    }

    /// The client's settings.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Fails with [`Error::Unsupported`] unless the backend reports
    /// `capability`.
    pub fn require(&self, capability: Capability) -> Result<()> {
        if self.backend.capabilities().has(capability) {
            Ok(())
        } else {
            Err(self.unsupported(capability))
        }
    }

    /// The [`Error::Unsupported`] for `capability` on this backend.
    pub fn unsupported(&self, capability: Capability) -> Error {
        Error::Unsupported {
            backend: self.backend.name(),
            capability,
        }
    }

    /// The backend's [`ExclusiveClaim`], or [`Error::Unsupported`].
    pub fn exclusive_claim(&self) -> Result<&dyn ExclusiveClaim> {
        self.require(Capability::ExclusiveClaim)?;
        self.backend
            .exclusive_claim()
            .ok_or_else(|| self.unsupported(Capability::ExclusiveClaim))
    }

    /// The backend's [`FanOut`], or [`Error::Unsupported`].
    pub fn fan_out(&self) -> Result<&dyn FanOut> {
        self.require(Capability::FanOut)?;
        self.backend
            .fan_out()
            .ok_or_else(|| self.unsupported(Capability::FanOut))
    }

    /// The backend's [`ReplyChannel`], or [`Error::Unsupported`].
    pub fn reply_channel(&self) -> Result<&dyn ReplyChannel> {
        self.require(Capability::RequestReply)?;
        self.backend
            .reply_channel()
            .ok_or_else(|| self.unsupported(Capability::RequestReply))
    }

    /// Per-client state of a feature crate: the value of type `T` (one per
    /// type and client, shared by the client's clones), created by `init` on
    /// first use.
    pub fn extension<T, F>(&self, init: F) -> Arc<T>
    where
        T: std::any::Any + Send + Sync,
        F: FnOnce() -> T,
    {
        self.extensions.get_or_init(init)
    }

    /// A token cancelled when the client shuts down (or its last clone is
    /// dropped). Background work of feature crates selects on it.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.child_token()
    }

    /// True once shutdown has started.
    pub fn is_shut_down(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Fails with [`Error::Shutdown`] once shutdown has started.
    pub fn ensure_open(&self) -> Result<()> {
        if self.is_shut_down() {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }

    /// Spawns a background task owned by the client: shutdown waits for it
    /// (it should watch [`Runtime::shutdown_token`]).
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(task)
    }

    /// Checks a body against [`ClientConfig::max_payload_bytes`].
    pub fn check_payload(&self, body: &[u8]) -> Result<()> {
        let max = self.config.max_payload_bytes;
        if body.len() > max {
            return Err(Error::PayloadTooLarge {
                size: body.len(),
                max,
            });
        }
        Ok(())
    }

    /// Checks what a push needs before anything is sent: an open client, the
    /// payload limit, valid options the backend supports.
    pub fn check_push(&self, body: &[u8], options: &PushOptions) -> Result<()> {
        self.ensure_open()?;
        self.check_payload(body)?;
        options.validate()?;
        if options.delay.is_some_and(|d| !d.is_zero()) {
            self.require(Capability::DelayedDelivery)?;
        }
        if options.unique.is_some() {
            self.require(Capability::ExclusiveClaim)?;
        }
        if options.priority != Priority::Normal {
            self.require(Capability::Priorities)?;
        }
        Ok(())
    }

    /// Marks `topic` as having lanes before a push of `options` that goes
    /// to one ([`lane_mark`](crate::lane_mark)).
    async fn mark_lanes<'o>(
        &self,
        topic: &Topic,
        mut priorities: impl Iterator<Item = &'o PushOptions>,
    ) -> Result<()> {
        if priorities.any(|options| options.priority != Priority::Normal) {
            // A topic whose lanes have no name (one of ezmq's own) fails
            // here, before anything is sent.
            Priority::High.lane(topic)?;
            let marks = self.extension(LaneMarks::default);
            marks.mark(self.exclusive_claim()?, topic).await?;
        }
        Ok(())
    }

    /// Publishes to an already validated (possibly internal) topic through
    /// the producer pipeline (checks, job id and metadata, trace context,
    /// metrics); the job's id.
    pub async fn publish(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<JobId> {
        self.publish_owned(topic, body, options.clone()).await
    }

    /// [`Runtime::publish`] with owned options (no copy).
    pub(crate) async fn publish_owned(
        &self,
        topic: &Topic,
        body: Bytes,
        options: PushOptions,
    ) -> Result<JobId> {
        self.check_push(&body, &options)?;
        self.mark_lanes(topic, std::iter::once(&options)).await?;
        producer::publish(&self.telemetry, &*self.backend, topic, body, options).await
    }

    /// Publishes through the producer pipeline — the checks, the lane
    /// mark, the job id and metadata, the unique key, the priority lane,
    /// the trace context, the `send` span and the metrics — with `store`
    /// as its last step in place of [`Backend::publish`]: for a backend's
    /// own push path that writes elsewhere, such as PostgreSQL's push
    /// inside the caller's transaction. `store` gets the queue (the topic
    /// or its priority lane), the body and the stamped options; the job's
    /// id once it returned `Ok`.
    pub async fn publish_with<F, Fut>(
        &self,
        topic: &Topic,
        body: Bytes,
        options: PushOptions,
        store: F,
    ) -> Result<JobId>
    where
        F: FnOnce(Topic, Bytes, PushOptions) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        self.check_push(&body, &options)?;
        self.mark_lanes(topic, std::iter::once(&options)).await?;
        producer::publish_with(&self.telemetry, &*self.backend, topic, body, options, store).await
    }

    /// Publishes a batch to an already validated topic through the
    /// producer pipeline and [`Backend::publish_batch`]: each job's id or
    /// error, in order. Every job is checked first; one that cannot work
    /// fails the whole batch before anything is sent.
    pub async fn publish_batch(
        &self,
        topic: &Topic,
        jobs: Vec<(Bytes, PushOptions)>,
    ) -> Result<Vec<Result<JobId>>> {
        for (index, (body, options)) in jobs.iter().enumerate() {
            self.check_push(body, options)
                .map_err(|err| Error::BatchRejected {
                    index,
                    source: Box::new(err),
                })?;
        }
        self.mark_lanes(topic, jobs.iter().map(|(_, options)| options))
            .await?;
        Ok(producer::publish_batch(&self.telemetry, &*self.backend, topic, jobs).await)
    }

    /// Broadcasts to every consumer group of an already validated topic
    /// ([`FanOut::publish_to_groups`]) through the same producer path as
    /// [`Runtime::publish`]: checks, `send` span, trace context, metrics.
    /// Fails with [`Error::Unsupported`] without [`Capability::FanOut`].
    pub async fn publish_to_groups(
        &self,
        topic: &Topic,
        body: Bytes,
        options: &PushOptions,
    ) -> Result<Option<usize>> {
        let fan_out = self.fan_out()?;
        self.check_push(&body, options)?;
        if options.priority != Priority::Normal {
            return Err(Error::invalid_option(
                "priority",
                "a broadcast has no priority: every group gets every message",
            ));
        }
        if options.delay.is_some_and(|d| !d.is_zero()) {
            if let Some(why) = fan_out.cannot_delay_broadcasts() {
                return Err(Error::invalid_option("delay", why));
            }
        }
        producer::publish_to_groups(
            &self.telemetry,
            self.backend.name(),
            fan_out,
            topic,
            body,
            options.clone(),
        )
        .await
    }

    /// Starts a listener on `source` (a possibly internal topic, or a
    /// consumer group).
    ///
    /// The listener belongs to the client: it runs until
    /// [`ListenerHandle::stop`] or the client's shutdown, whatever happens
    /// to the handle. Fails on invalid options, including a dead-letter
    /// topic that is not a valid name, and for a group source on a backend
    /// without [`Capability::FanOut`].
    ///
    /// # Panics
    ///
    /// When called outside a Tokio runtime.
    pub fn listen(
        &self,
        source: Source,
        handler: Arc<dyn Handler>,
        options: ConsumeOptions,
    ) -> Result<ListenerHandle> {
        self.ensure_open()?;
        options.validate()?;
        if matches!(source, Source::Group { .. }) {
            self.require(Capability::FanOut)?;
        }
        for (set, option, capability) in [
            (
                options.rate_limit.is_some(),
                "rate_limit",
                Capability::RateLimit,
            ),
            (
                options.global_concurrency.is_some(),
                "global_concurrency",
                Capability::GlobalConcurrency,
            ),
            (
                options.rate_limit_by.is_some(),
                "rate_limit_by",
                Capability::RateLimitByKey,
            ),
        ] {
            if !set {
                continue;
            }
            if matches!(source, Source::Group { .. }) {
                return Err(Error::invalid_option(
                    option,
                    "a consumer group's listener cannot have a cluster-wide limit yet; limit the topic's own listeners",
                ));
            }
            self.require(capability)?;
        }
        let handle = listener::start(self, &self.listeners, source, handler, options)?;
        self.announce_presence();
        Ok(handle)
    }

    /// Registers `entry` in this client's presence (see
    /// [`presence`]) until the guard is dropped: tools
    /// then see it as running in this process. Feature crates register
    /// what they run (the crontab scheduler its crontab). Does nothing
    /// visible on a backend without [`Capability::Peek`].
    ///
    /// # Panics
    ///
    /// When called outside a Tokio runtime.
    pub fn presence_entry(&self, entry: PresenceEntry) -> PresenceGuard {
        let guard = self.presence.register(entry);
        self.announce_presence();
        guard
    }

    /// This client's presence state.
    pub(crate) fn presence(&self) -> Arc<Presence> {
        Arc::clone(&self.presence)
    }

    /// Starts the presence announcer (once), or wakes it.
    fn announce_presence(&self) {
        if !presence::available(self.backend.as_ref()) || self.is_shut_down() {
            return;
        }
        if self.presence.claim_announcer() {
            self.spawn(presence::announce(
                Arc::clone(&self.presence),
                Arc::clone(&self.listeners),
                Arc::clone(&self.backend),
                self.shutdown_token(),
            ));
        } else {
            self.presence.changed();
        }
    }

    /// Handles of this client's listeners that have not drained yet.
    pub fn listeners(&self) -> Vec<ListenerHandle> {
        self.listeners
            .running()
            .into_iter()
            .map(ListenerHandle::from_control)
            .collect()
    }

    /// Stops every listener (each gets `grace`), cancels background work,
    /// waits for every task, then closes the backend.
    pub(crate) async fn shutdown(&self, grace: Duration) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Err(Error::Shutdown);
        }
        // Listeners first get the grace period, then the token stops them
        // (and every other background task) from starting new work.
        self.listeners.stop_all(grace);
        self.shutdown.cancel();
        self.tasks.close();
        // Every task is joined: a listener ends once its jobs are settled
        // and its last ACKs flushed, so closing the backend after this
        // loses nothing.
        self.tasks.wait().await;
        self.backend.close().await
    }
}
