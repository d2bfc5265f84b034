//! Job handlers.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use serde::de::DeserializeOwned;

use crate::error::BoxError;
use crate::job::Job;

/// Processes jobs of a consume listener.
///
/// `Ok(())` acknowledges the job. An error (or a panic) gives it back for a
/// retry; a [`Permanent`] error sends it straight to the dead-letter topic.
///
/// Closures get this trait through [`handler_fn`]; the `MqClientExt`
/// methods wrap them for you.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Processes one job.
    async fn handle(&self, job: Job) -> Result<(), BoxError>;
}

/// A [`Handler`] made from an async closure. Built by [`handler_fn`].
#[derive(Clone)]
pub struct HandlerFn<F>(F);

impl<F> fmt::Debug for HandlerFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HandlerFn")
    }
}

/// Turns `async |job| -> Result<(), E>` into a [`Handler`].
///
/// ```
/// use ezmq_core::{handler_fn, Job};
///
/// let h = handler_fn(|job: Job| async move {
///     println!("got {:?}", job.body());
///     Ok::<(), std::io::Error>(())
/// });
/// # let _ = h;
/// ```
pub fn handler_fn<F, Fut, E>(f: F) -> HandlerFn<F>
where
    F: Fn(Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<BoxError> + 'static,
{
    HandlerFn(f)
}

#[async_trait]
impl<F, Fut, E> Handler for HandlerFn<F>
where
    F: Fn(Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<BoxError> + 'static,
{
    async fn handle(&self, job: Job) -> Result<(), BoxError> {
        (self.0)(job).await.map_err(Into::into)
    }
}

/// Turns `async |value: T| -> Result<(), E>` into a [`Handler`] that decodes
/// every job as JSON `T` first. A job that does not decode is a
/// [`Permanent`] failure (dead-lettered without retries).
///
/// ```
/// use ezmq_core::json_handler;
///
/// #[derive(serde::Deserialize)]
/// struct Email { to: String }
///
/// let h = json_handler(|email: Email| async move {
///     println!("sending to {}", email.to);
///     Ok::<(), std::io::Error>(())
/// });
/// # let _ = h;
/// ```
pub fn json_handler<T, F, Fut, E>(f: F) -> impl Handler
where
    T: DeserializeOwned + Send + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<BoxError> + 'static,
{
    let f = Arc::new(f);
    handler_fn(move |job: Job| {
        let f = Arc::clone(&f);
        async move {
            let value: T = job
                .json()
                .map_err(|e| -> BoxError { Box::new(Permanent::new(e)) })?;
            f(value).await.map_err(Into::into)
        }
    })
}

/// A handler error that no retry can fix (bad payload, unknown record): the
/// job goes to the dead-letter topic at once.
///
/// ```
/// use ezmq_core::{BoxError, Permanent};
///
/// let err: BoxError = Permanent::new("order 42 does not exist").into();
/// assert!(Permanent::is_permanent(err.as_ref()));
///
/// // Also when wrapped in the application's own error (as its source).
/// #[derive(Debug, thiserror::Error)]
/// #[error("import failed")]
/// struct ImportError(#[source] Permanent);
/// let wrapped: BoxError = ImportError(Permanent::new("bad row")).into();
/// assert!(Permanent::is_permanent(wrapped.as_ref()));
/// ```
#[derive(Debug, thiserror::Error)]
#[error("permanent failure: {0}")]
pub struct Permanent(#[source] pub BoxError);

impl Permanent {
    /// Wraps the cause.
    pub fn new(cause: impl Into<BoxError>) -> Self {
        Permanent(cause.into())
    }

    /// True when `err`, or any error in its source chain, is a
    /// [`Permanent`] (so a `Permanent` wrapped in the application's own
    /// error type or in `anyhow` context still skips the retries).
    pub fn is_permanent(err: &(dyn std::error::Error + 'static)) -> bool {
        let mut current = Some(err);
        while let Some(e) = current {
            if e.is::<Permanent>() {
                return true;
            }
            current = e.source();
        }
        false
    }
}
