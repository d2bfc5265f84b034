//! `RequestReplyExt`: request-reply methods for every [`MqClient`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::Source;
use ezmq_core::{BoxError, ListenerHandle, MqClient, Result, Topic};
use futures::FutureExt as _;
use serde::de::DeserializeOwned;
use serde::Serialize;
use uuid::Uuid;

use crate::message::{Reply, Request};
use crate::options::{ReplyListenerOptions, RequestOptions};
use crate::router::ReplyRouter;
use crate::worker::{ReplyFn, ReplyHandler};

/// Request-reply for every [`MqClient`] (an `ezmq_core::Client`, an
/// `Arc<dyn MqClient>`, ...) whose backend reports the
/// [`RequestReply`](ezmq_core::spi::Capability::RequestReply) capability
/// (private reply inboxes). Bring it into scope with
/// `use ezmq_request_reply::RequestReplyExt`.
///
/// A caller sends a request to a topic and waits for one reply; any client
/// with a reply listener on that topic answers it. See the
/// [crate documentation](crate) for the guarantees.
///
/// ```no_run
/// # async fn demo(
/// #     worker: ezmq_core::Client,
/// #     caller: std::sync::Arc<dyn ezmq_core::MqClient>,
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
    /// Sends `body` to `topic` and waits up to `timeout` for the reply.
    ///
    /// Fails with [`Error::NoReply`](ezmq_core::Error::NoReply) when no reply
    /// came in time (no reply listener on the topic, a worker too slow or
    /// gone), [`Error::Remote`](ezmq_core::Error::Remote) when the handler
    /// failed or panicked,
    /// [`Error::Unsupported`](ezmq_core::Error::Unsupported) on a backend
    /// without reply inboxes, and
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
    /// [`ReplyListenerOptions`] (requests taken at most once).
    ///
    /// `Ok(body)` is sent back as the reply; an error (its message and
    /// causes) or a panic reaches the caller as
    /// [`Error::Remote`](ezmq_core::Error::Remote). A request taken after
    /// its deadline is dropped unhandled; a reply ready after the deadline
    /// is dropped. Requests are never retried by the listener. Fails at once
    /// with [`Error::Unsupported`](ezmq_core::Error::Unsupported) on a
    /// backend without reply inboxes.
    async fn add_reply_listener<F, Fut, E>(&self, topic: &str, handler: F) -> Result<ListenerHandle>
    where
        F: Fn(Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Bytes, E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.add_reply_listener_with(topic, ReplyListenerOptions::default(), handler)
            .await
    }

    /// [`RequestReplyExt::add_reply_listener`] with explicit options:
    /// [`ReplyListenerOptions`] or plain
    /// [`ConsumeOptions`](ezmq_core::ConsumeOptions) (`concurrency` is how
    /// many requests this client handles at once; either way requests are
    /// taken at most once unless
    /// [`ReplyListenerOptions::with_at_least_once`] says otherwise).
    async fn add_reply_listener_with<O, F, Fut, E>(
        &self,
        topic: &str,
        options: O,
        handler: F,
    ) -> Result<ListenerHandle>
    where
        O: Into<ReplyListenerOptions> + Send + 'static,
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
        self.add_json_reply_listener_with(topic, ReplyListenerOptions::default(), handler)
            .await
    }

    /// [`RequestReplyExt::add_json_reply_listener`] with explicit options.
    async fn add_json_reply_listener_with<O, T, R, F, Fut, E>(
        &self,
        topic: &str,
        options: O,
        handler: F,
    ) -> Result<ListenerHandle>
    where
        O: Into<ReplyListenerOptions> + Send + 'static,
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
impl<C: MqClient + ?Sized> RequestReplyExt for C {
    async fn request_with(
        &self,
        topic: &str,
        body: Bytes,
        options: RequestOptions,
    ) -> Result<Reply> {
        let topic = Topic::new(topic)?;
        options.validate()?;
        let runtime = self.runtime();
        runtime.ensure_open()?;
        runtime.reply_channel()?;
        let router = ReplyRouter::of(runtime);
        let id = Uuid::new_v4();
        let call = router.call(runtime, &topic, id, body, &options);
        crate::telemetry::instrument(runtime, &topic, id, call).await
    }

    async fn add_reply_listener_with<O, F, Fut, E>(
        &self,
        topic: &str,
        options: O,
        handler: F,
    ) -> Result<ListenerHandle>
    where
        O: Into<ReplyListenerOptions> + Send + 'static,
        F: Fn(Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Bytes, E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        let topic = Topic::new(topic)?;
        let runtime = self.runtime();
        runtime.ensure_open()?;
        // Fails now, not at the first request, without reply inboxes.
        runtime.reply_channel()?;
        let f: ReplyFn =
            Arc::new(move |request| handler(request).map(|r| r.map_err(Into::into)).boxed());
        let handler = ReplyHandler::new(
            Arc::clone(runtime.backend()),
            runtime.config().max_payload_bytes,
            f,
        );
        let options = options.into().consume_options();
        runtime.listen(Source::Topic(topic), Arc::new(handler), options)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ezmq_core::spi::Capability;
    use ezmq_core::{Client, ClientConfig};
    use ezmq_test_support::{assert_unsupported, BareBackend};

    use super::*;

    #[tokio::test]
    async fn fails_at_once_without_reply_inboxes() {
        let client: Arc<dyn MqClient> = Arc::new(Client::new(BareBackend, ClientConfig::default()));
        let listener = client
            .add_reply_listener("echo", |req: Request| async move {
                Ok::<_, std::io::Error>(req.into_body())
            })
            .await;
        assert_unsupported(listener.map(|_| ()), Capability::RequestReply);
        let reply = client
            .request("echo", "x".into(), Duration::from_secs(1))
            .await;
        assert_unsupported(reply.map(|_| ()), Capability::RequestReply);
    }
}
