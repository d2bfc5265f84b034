//! [`ListenerBuilder`]: one way to start any listener, from
//! [`MqClientExt::listener`](crate::MqClientExt::listener).

use std::future::Future;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::consume_options::ConsumeOptions;
use crate::error::{BoxError, Result};
use crate::handler::{handler_fn, json_handler, Handler, Permanent};
use crate::job::Job;
use crate::listener::ListenerHandle;
use crate::mq_client::MqClient;

/// A listener about to start: a topic, its [`ConsumeOptions`], then the
/// handler, given as a [`Handler`], a closure on the [`Job`], or a closure
/// on the decoded JSON body. The `add_*_listener*` methods of
/// [`MqClientExt`](crate::MqClientExt) are shorthands for it.
///
/// ```no_run
/// # async fn demo(client: &impl ezmq_core::MqClient) -> ezmq_core::Result<()> {
/// use ezmq_core::{ConsumeOptions, Job, MqClientExt};
///
/// #[derive(serde::Deserialize)]
/// struct Email { to: String }
///
/// let emails = client
///     .listener("emails")
///     .options(ConsumeOptions::new().with_concurrency(8).with_max_attempts(5))
///     .json(|email: Email| async move {
///         println!("sending to {}", email.to);
///         Ok::<(), std::io::Error>(())
///     })
///     .await?;
/// let audit = client
///     .listener("audit")
///     .run(|job: Job| async move {
///         println!("{} attempt {}", job.id(), job.attempt());
///         Ok::<(), std::io::Error>(())
///     })
///     .await?;
/// # let _ = (emails, audit);
/// # Ok(()) }
/// ```
#[must_use = "a listener builder does nothing until a handler starts it"]
pub struct ListenerBuilder<'c, C: MqClient + ?Sized> {
    client: &'c C,
    topic: String,
    options: ConsumeOptions,
}

impl<C: MqClient + ?Sized> std::fmt::Debug for ListenerBuilder<'_, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerBuilder")
            .field("topic", &self.topic)
            .field("options", &self.options)
            .finish()
    }
}

impl<'c, C: MqClient + ?Sized> ListenerBuilder<'c, C> {
    pub(crate) fn new(client: &'c C, topic: &str) -> Self {
        ListenerBuilder {
            client,
            topic: topic.to_owned(),
            options: ConsumeOptions::default(),
        }
    }

    /// The listener's options (default: [`ConsumeOptions::default`]).
    pub fn options(mut self, options: ConsumeOptions) -> Self {
        self.options = options;
        self
    }

    /// Starts the listener with `handler`.
    pub async fn handler(self, handler: impl Handler) -> Result<ListenerHandle> {
        self.client
            .add_listener(&self.topic, Arc::new(handler), self.options)
            .await
    }

    /// Starts the listener with a closure run for every job.
    pub async fn run<F, Fut, E>(self, f: F) -> Result<ListenerHandle>
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.handler(handler_fn(f)).await
    }

    /// Starts the listener with a closure on each job's body decoded as
    /// JSON `T`; a body that does not decode is a [`Permanent`] failure.
    pub async fn json<T, F, Fut, E>(self, f: F) -> Result<ListenerHandle>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.handler(json_handler(f)).await
    }

    /// Starts the listener with a closure on the decoded JSON `T` and the
    /// [`Job`] (id, attempt, headers).
    pub async fn json_job<T, F, Fut, E>(self, f: F) -> Result<ListenerHandle>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T, Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        let f = Arc::new(f);
        self.run(move |job: Job| {
            let f = Arc::clone(&f);
            async move {
                let value: T = job
                    .json()
                    .map_err(|e| -> BoxError { Box::new(Permanent::new(e)) })?;
                f(value, job).await.map_err(Into::into)
            }
        })
        .await
    }

    /// Starts the listener with a closure that gets `state` (cloned once
    /// per job, as axum's `State`) and the job.
    pub async fn with_state<S, F, Fut, E>(self, state: S, f: F) -> Result<ListenerHandle>
    where
        S: Clone + Send + Sync + 'static,
        F: Fn(S, Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.run(move |job: Job| f(state.clone(), job)).await
    }
}
