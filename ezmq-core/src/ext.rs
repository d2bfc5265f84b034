//! `MqClientExt`: typed and closure-based conveniences over any
//! [`MqClient`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::consume_options::ConsumeOptions;
use crate::error::{BoxError, Result};
use crate::handler::handler_fn;
use crate::job::{Job, JobId};
use crate::listener::ListenerHandle;
use crate::listener_builder::ListenerBuilder;
use crate::mq_client::MqClient;
use crate::push_options::PushOptions;

/// Conveniences for every [`MqClient`]: JSON payloads and closures as
/// handlers. Implemented for all clients; bring it into scope with
/// `use ezmq_core::MqClientExt`.
///
/// ```no_run
/// # async fn demo(client: &impl ezmq_core::MqClient) -> ezmq_core::Result<()> {
/// use ezmq_core::{Job, MqClientExt};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Email { to: String }
///
/// client.add_json_listener("emails", |email: Email| async move {
///     println!("sending to {}", email.to);
///     Ok::<(), std::io::Error>(())
/// }).await?;
/// client.push_json("emails", &Email { to: "a@example.com".into() }).await?;
/// # Ok(()) }
/// ```
#[async_trait]
pub trait MqClientExt: MqClient {
    /// Starts building a listener on `topic` (see [`ListenerBuilder`]);
    /// the `add_*_listener*` methods below are shorthands for it.
    fn listener(&self, topic: &str) -> ListenerBuilder<'_, Self> {
        ListenerBuilder::new(self, topic)
    }

    /// Pushes each value encoded as JSON, as one batch
    /// ([`MqClient::push_batch`]).
    async fn push_json_batch<T>(&self, topic: &str, values: &[T]) -> Result<Vec<Result<JobId>>>
    where
        T: Serialize + Sync,
    {
        let mut jobs = Vec::with_capacity(values.len());
        for value in values {
            jobs.push((serde_json::to_vec(value)?.into(), PushOptions::default()));
        }
        self.push_batch(topic, jobs).await
    }

    /// Pushes `value` encoded as JSON.
    async fn push_json<T>(&self, topic: &str, value: &T) -> Result<JobId>
    where
        T: Serialize + Sync + ?Sized,
    {
        self.push_json_with(topic, value, PushOptions::default())
            .await
    }

    /// Pushes `value` encoded as JSON, with options.
    async fn push_json_with<T>(&self, topic: &str, value: &T, options: PushOptions) -> Result<JobId>
    where
        T: Serialize + Sync + ?Sized,
    {
        let body = serde_json::to_vec(value)?;
        self.push_with(topic, body.into(), options).await
    }

    /// Pushes `value` encoded as JSON, deliverable after `delay` (never
    /// earlier).
    async fn push_json_delay<T>(&self, topic: &str, value: &T, delay: Duration) -> Result<JobId>
    where
        T: Serialize + Sync + ?Sized,
    {
        self.push_json_with(topic, value, PushOptions::default().with_delay(delay))
            .await
    }

    /// Starts a listener with default [`ConsumeOptions`] that runs the
    /// closure for every job.
    async fn add_consume_listener<F, Fut, E>(&self, topic: &str, f: F) -> Result<ListenerHandle>
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.add_listener(topic, Arc::new(handler_fn(f)), ConsumeOptions::default())
            .await
    }

    /// Starts a listener with explicit options that runs the closure for
    /// every job.
    async fn add_consume_listener_with<F, Fut, E>(
        &self,
        topic: &str,
        options: ConsumeOptions,
        f: F,
    ) -> Result<ListenerHandle>
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.add_listener(topic, Arc::new(handler_fn(f)), options)
            .await
    }

    /// Starts a listener that decodes every job as JSON `T`. A job that does
    /// not decode is a [`Permanent`](crate::Permanent) failure: it goes to the dead-letter
    /// topic without retries.
    async fn add_json_listener<T, F, Fut, E>(&self, topic: &str, f: F) -> Result<ListenerHandle>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.add_json_listener_with(topic, ConsumeOptions::default(), f)
            .await
    }

    /// [`MqClientExt::add_json_listener`] with explicit options.
    async fn add_json_listener_with<T, F, Fut, E>(
        &self,
        topic: &str,
        options: ConsumeOptions,
        f: F,
    ) -> Result<ListenerHandle>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.listener(topic).options(options).json(f).await
    }

    /// A typed listener that still sees the delivery: the closure gets the
    /// decoded JSON `T` and the [`Job`] (id, attempt, headers). A job that
    /// does not decode is a [`Permanent`](crate::Permanent) failure.
    ///
    /// ```no_run
    /// # async fn demo(client: &impl ezmq_core::MqClient) -> ezmq_core::Result<()> {
    /// use ezmq_core::{ConsumeOptions, Job, MqClientExt};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Charge { cents: u64 }
    ///
    /// client
    ///     .add_json_job_listener_with("charges", ConsumeOptions::new(), |c: Charge, job: Job| async move {
    ///         println!("charge {} (attempt {}, tenant {:?})", c.cents, job.attempt(), job.headers().get("tenant"));
    ///         Ok::<(), std::io::Error>(())
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    async fn add_json_job_listener_with<T, F, Fut, E>(
        &self,
        topic: &str,
        options: ConsumeOptions,
        f: F,
    ) -> Result<ListenerHandle>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T, Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.listener(topic).options(options).json_job(f).await
    }

    /// A listener whose closure gets shared state with every job, as axum's
    /// `State` or apalis' `Data`: `state` (typically an `Arc` of a
    /// connection pool or a service) is cloned once per job, with no
    /// clones to write in the closure.
    ///
    /// ```no_run
    /// # async fn demo(client: &impl ezmq_core::MqClient) -> ezmq_core::Result<()> {
    /// use std::sync::Arc;
    /// use ezmq_core::{ConsumeOptions, Job, MqClientExt};
    ///
    /// struct Mailer { from: String }
    /// let mailer = Arc::new(Mailer { from: "noreply@example.com".into() });
    ///
    /// client
    ///     .add_stateful_listener_with("emails", ConsumeOptions::new(), mailer, |mailer: Arc<Mailer>, job: Job| async move {
    ///         println!("{} sends {:?}", mailer.from, job.body());
    ///         Ok::<(), std::io::Error>(())
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    async fn add_stateful_listener_with<S, F, Fut, E>(
        &self,
        topic: &str,
        options: ConsumeOptions,
        state: S,
        f: F,
    ) -> Result<ListenerHandle>
    where
        S: Clone + Send + Sync + 'static,
        F: Fn(S, Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.listener(topic)
            .options(options)
            .with_state(state, f)
            .await
    }
}

impl<C: MqClient + ?Sized> MqClientExt for C {}
