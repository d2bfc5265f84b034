//! `RequestReplyExt`: request-reply methods for every [`Client`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::{Backend, BoxError, Client, ConsumeOptions, ListenerHandle, Result, Topic};
use futures::FutureExt as _;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::Instrument as _;
use uuid::Uuid;

use crate::message::{Reply, Request};
use crate::options::RequestOptions;
use crate::router::ReplyRouter;
use crate::worker::{ReplyFn, ReplyHandler};

/// Request-reply over queues, for every [`Client`] whatever its backend.
/// Bring it into scope with `use ezmq_request_reply::RequestReplyExt`.
///
/// A caller sends a request to a topic and waits for one reply; any client
/// with a reply listener on that topic answers it. See the
/// [crate documentation](crate) for the guarantees.
///
/// ```no_run
/// # async fn demo<B: ezmq_core::Backend>(
/// #     worker: ezmq_core::Client<B>,
/// #     caller: ezmq_core::Client<B>,
/// # ) -> ezmq_core::Result<()> {
/// use std::time::Duration;
/// use ezmq_request_reply::RequestReplyExt;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Add { a: i64, b: i64 }
///
/// worker.add_json_reply_listener("calc.add", |req: Add| async move {
///     Ok::<i64, std::io::Error>(req.a + req.b)
/// }).await?;
///
/// let sum: i64 = caller
///     .request_json("calc.add", &Add { a: 2, b: 3 }, Duration::from_secs(5))
///     .await?;
/// assert_eq!(sum, 5);
/// # Ok(()) }
/// ```
#[async_trait]
pub trait RequestReplyExt {
    /// Sends `body` to `topic` and waits up to `timeout` for the reply
    /// (at-most-once delivery; see [`RequestOptions`]).
    ///
    /// Fails with [`Error::Timeout`](ezmq_core::Error::Timeout) when no reply
    /// came in time, [`Error::Remote`](ezmq_core::Error::Remote) when the
    /// handler failed or panicked, and
    /// [`Error::Shutdown`](ezmq_core::Error::Shutdown) at once when the
    /// client is (or gets) shut down.
    async fn request(&self, topic: &str, body: Bytes, timeout: Duration) -> Result<Reply> {
        self.request_with(topic, body, RequestOptions::new().with_timeout(timeout))
            .await
    }

    /// [`RequestReplyExt::request`] with explicit options.
    async fn request_with(
        &self,
        topic: &str,
        body: Bytes,
        options: RequestOptions,
    ) -> Result<Reply>;

    /// Sends `request` encoded as JSON and decodes the reply as JSON.
    async fn request_json<Req, Resp>(
        &self,
        topic: &str,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp>
    where
        Req: Serialize + Sync + ?Sized,
        Resp: DeserializeOwned,
    {
        self.request_json_with(topic, request, RequestOptions::new().with_timeout(timeout))
            .await
    }

    /// [`RequestReplyExt::request_json`] with explicit options.
    async fn request_json_with<Req, Resp>(
        &self,
        topic: &str,
        request: &Req,
        options: RequestOptions,
    ) -> Result<Resp>
    where
        Req: Serialize + Sync + ?Sized,
        Resp: DeserializeOwned,
    {
        let body = serde_json::to_vec(request)?;
        let reply = self.request_with(topic, body.into(), options).await?;
        reply.json()
    }

    /// Answers the requests sent to `topic` with `handler`, using default
    /// [`ConsumeOptions`].
    ///
    /// `Ok(body)` is sent back as the reply; an error (its message and
    /// causes) or a panic reaches the caller as
    /// [`Error::Remote`](ezmq_core::Error::Remote). A request taken after
    /// its deadline is dropped unhandled; a reply ready after the deadline
    /// is dropped. Every request is acknowledged once handled (no listener
    /// retries); malformed messages go to the dead-letter topic.
    async fn add_reply_listener<F, Fut, E>(&self, topic: &str, handler: F) -> Result<ListenerHandle>
    where
        F: Fn(Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Bytes, E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.add_reply_listener_with(topic, ConsumeOptions::default(), handler)
            .await
    }

    /// [`RequestReplyExt::add_reply_listener`] with explicit options
    /// (`concurrency` is how many requests this client handles at once).
    async fn add_reply_listener_with<F, Fut, E>(
        &self,
        topic: &str,
        options: ConsumeOptions,
        handler: F,
    ) -> Result<ListenerHandle>
    where
        F: Fn(Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Bytes, E>> + Send + 'static,
        E: Into<BoxError> + 'static;

    /// Answers the requests sent to `topic`, decoding each as JSON `T` and
    /// encoding the answer `R` as JSON. A request that does not decode gets
    /// an error reply.
    async fn add_json_reply_listener<T, R, F, Fut, E>(
        &self,
        topic: &str,
        handler: F,
    ) -> Result<ListenerHandle>
    where
        T: DeserializeOwned + Send + 'static,
        R: Serialize + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<R, E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.add_json_reply_listener_with(topic, ConsumeOptions::default(), handler)
            .await
    }

    /// [`RequestReplyExt::add_json_reply_listener`] with explicit options.
    async fn add_json_reply_listener_with<T, R, F, Fut, E>(
        &self,
        topic: &str,
        options: ConsumeOptions,
        handler: F,
    ) -> Result<ListenerHandle>
    where
        T: DeserializeOwned + Send + 'static,
        R: Serialize + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<R, E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        let handler = Arc::new(handler);
        self.add_reply_listener_with(topic, options, move |request: Request| {
            let handler = Arc::clone(&handler);
            async move {
                let value: T = request
                    .json()
                    .map_err(|e| -> BoxError { format!("invalid request body: {e}").into() })?;
                let answer = handler(value).await.map_err(Into::into)?;
                let body = serde_json::to_vec(&answer).map_err(|e| -> BoxError {
                    format!("could not encode the reply: {e}").into()
                })?;
                Ok::<Bytes, BoxError>(body.into())
            }
        })
        .await
    }
}

#[async_trait]
impl<B: Backend> RequestReplyExt for Client<B> {
    async fn request_with(
        &self,
        topic: &str,
        body: Bytes,
        options: RequestOptions,
    ) -> Result<Reply> {
        let topic = Topic::new(topic)?;
        options.validate()?;
        self.ensure_open()?;
        let router = ReplyRouter::of(self);
        let id = Uuid::new_v4();
        let span = tracing::debug_span!("request", topic = %topic, correlation_id = %id);
        router
            .call(self, &topic, id, body, &options)
            .instrument(span)
            .await
    }

    async fn add_reply_listener_with<F, Fut, E>(
        &self,
        topic: &str,
        options: ConsumeOptions,
        handler: F,
    ) -> Result<ListenerHandle>
    where
        F: Fn(Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Bytes, E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        let topic = Topic::new(topic)?;
        let f: ReplyFn =
            Arc::new(move |request| handler(request).map(|r| r.map_err(Into::into)).boxed());
        let handler = ReplyHandler::new(
            Arc::clone(self.backend()),
            self.config().max_payload_bytes,
            f,
        );
        self.listen_to(topic, Arc::new(handler), options)
    }
}
