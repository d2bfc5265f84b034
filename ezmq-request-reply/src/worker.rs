//! The worker side: a consume-listener [`Handler`] that reads a request's
//! headers, runs the user's handler and sends the reply to the caller's
//! inbox through the backend's [`ReplyChannel`](ezmq_core::spi::ReplyChannel).

use std::any::Any;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{error_chain, panic_message, Backend};
use ezmq_core::{BoxError, Handler, Job, JobId, Permanent, Topic};
use futures::future::BoxFuture;
use futures::FutureExt as _;
use tracing::{debug, trace, warn, Instrument as _};

use crate::envelope::{self, Outcome, RequestEnvelope};
use crate::message::{from_unix_ms, Request};
use crate::options::ceil_secs;

/// The request job a log event is about: its topic, message id and
/// attempt go on every warning.
#[derive(Debug)]
struct About {
    topic: Topic,
    id: JobId,
    attempt: u32,
}

impl About {
    fn of(job: &Job) -> Self {
        About {
            topic: job.topic().clone(),
            id: job.id().clone(),
            attempt: job.attempt(),
        }
    }
}

/// A type-erased reply handler: request in, body or error out.
pub(crate) type ReplyFn =
    Arc<dyn Fn(Request) -> BoxFuture<'static, Result<Bytes, BoxError>> + Send + Sync>;

/// The listener handler behind `add_reply_listener`.
///
/// It holds the backend, not the client, so a listener never keeps its
/// client alive.
pub(crate) struct ReplyHandler {
    backend: Arc<dyn Backend>,
    max_payload: usize,
    f: ReplyFn,
}

impl fmt::Debug for ReplyHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyHandler")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl ReplyHandler {
    pub(crate) fn new(backend: Arc<dyn Backend>, max_payload: usize, f: ReplyFn) -> Self {
        ReplyHandler {
            backend,
            max_payload,
            f,
        }
    }

    async fn serve(&self, job: Job, env: RequestEnvelope) {
        let deadline = from_unix_ms(env.deadline_ms);
        if SystemTime::now() >= deadline {
            debug!("request expired before a worker took it; dropped unhandled");
            return;
        }
        let about = About::of(&job);
        let request = Request {
            correlation_id: env.id,
            topic: about.topic.clone(),
            deadline,
            attempt: about.attempt,
            body: job.into_body(),
        };
        let outcome = run(&self.f, request, &about).await;
        let remaining = deadline
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        if remaining.is_zero() {
            debug!("request expired while it was handled; reply dropped");
            return;
        }
        if let Outcome::Err(message) = &outcome {
            debug!(error = %message, "handler failed; sending the error");
        }
        let msg = match self.encode(env.id, &outcome, &about) {
            Ok(msg) => msg,
            Err(err) => {
                warn!(
                    topic = %about.topic,
                    message_id = %about.id,
                    attempt = about.attempt,
                    cause = %err,
                    "could not encode the reply; dropped (the caller times out)"
                );
                return;
            }
        };
        let Some(channel) = self.backend.reply_channel() else {
            // Checked when the listener was added; cannot happen.
            warn!(
                topic = %about.topic,
                message_id = %about.id,
                attempt = about.attempt,
                "the backend has no reply channel; reply dropped"
            );
            return;
        };
        // Kept until the deadline only: a later reply is useless.
        let ttl = Duration::from_secs(ceil_secs(remaining).max(1));
        match channel.send_reply(&env.reply_to, msg, ttl).await {
            Ok(()) => trace!("reply sent"),
            // The caller will time out; retrying the request would repeat
            // its side effects.
            Err(err) => {
                warn!(
                    topic = %about.topic,
                    message_id = %about.id,
                    attempt = about.attempt,
                    cause = %err,
                    reply_to = %env.reply_to,
                    "could not send the reply (the caller times out)"
                )
            }
        }
    }

    /// Encodes the reply; a body over the client's payload limit becomes an
    /// error reply instead.
    fn encode(
        &self,
        id: uuid::Uuid,
        outcome: &Outcome,
        about: &About,
    ) -> Result<Bytes, serde_json::Error> {
        let msg = envelope::encode_reply(id, outcome)?;
        if msg.len() <= self.max_payload {
            return Ok(msg);
        }
        let message = format!(
            "reply of {} bytes exceeds the limit of {} bytes",
            msg.len(),
            self.max_payload
        );
        warn!(
            topic = %about.topic,
            message_id = %about.id,
            attempt = about.attempt,
            %message,
            "reply too large; sending an error reply instead"
        );
        envelope::encode_reply(id, &Outcome::Err(message))
    }
}

#[async_trait]
impl Handler for ReplyHandler {
    async fn handle(&self, job: Job) -> Result<(), BoxError> {
        let env = match envelope::decode_request(job.headers()) {
            Ok(env) => env,
            Err(err) => {
                // Nobody to answer: straight to the dead-letter topic (or,
                // at most once, logged and dropped).
                warn!(
                    topic = %job.topic(),
                    message_id = %job.id(),
                    attempt = job.attempt(),
                    cause = %err,
                    "malformed request"
                );
                return Err(Box::new(Permanent::new(err)));
            }
        };
        let span = tracing::debug_span!(
            "reply",
            topic = %job.topic(),
            correlation_id = %env.id,
        );
        self.serve(job, env).instrument(span).await;
        // Always acknowledged: the outcome went back to the caller (or the
        // deadline passed); a listener retry would repeat side effects.
        Ok(())
    }
}

/// Runs the handler; an error or a panic becomes an error message.
async fn run(f: &ReplyFn, request: Request, about: &About) -> Outcome {
    let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| f(request))) {
        Ok(fut) => fut,
        Err(panic) => return Outcome::Err(panic_text(panic.as_ref(), about)),
    };
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(Ok(body)) => Outcome::Ok(body),
        Ok(Err(err)) => Outcome::Err(error_chain(err.as_ref())),
        Err(panic) => Outcome::Err(panic_text(panic.as_ref(), about)),
    }
}

fn panic_text(panic: &(dyn Any + Send), about: &About) -> String {
    let detail = panic_message(panic);
    warn!(
        topic = %about.topic,
        message_id = %about.id,
        attempt = about.attempt,
        panic = %detail,
        "reply handler panicked; sending an error reply"
    );
    format!("reply handler panicked: {detail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn errors_and_panics_become_messages() {
        let req = || Request {
            correlation_id: uuid::Uuid::new_v4(),
            topic: ezmq_core::Topic::new("t").unwrap(),
            deadline: SystemTime::now() + Duration::from_secs(5),
            attempt: 1,
            body: Bytes::from_static(b"in"),
        };
        let about = About {
            topic: ezmq_core::Topic::new("t").unwrap(),
            id: JobId::new("j-1"),
            attempt: 1,
        };
        let ok: ReplyFn = Arc::new(|r: Request| async move { Ok(r.into_body()) }.boxed());
        assert_eq!(
            run(&ok, req(), &about).await,
            Outcome::Ok(Bytes::from_static(b"in"))
        );

        let failing: ReplyFn =
            Arc::new(|_| async { Err::<Bytes, BoxError>("no stock".into()) }.boxed());
        assert_eq!(
            run(&failing, req(), &about).await,
            Outcome::Err("no stock".into())
        );

        let panics_in_future: ReplyFn = Arc::new(|_| {
            async {
                panic!("kaboom");
            }
            .boxed()
        });
        assert_eq!(
            run(&panics_in_future, req(), &about).await,
            Outcome::Err("reply handler panicked: kaboom".into())
        );

        let panics_at_call: ReplyFn = Arc::new(|r: Request| panic!("bad {}", r.attempt()));
        assert_eq!(
            run(&panics_at_call, req(), &about).await,
            Outcome::Err("reply handler panicked: bad 1".into())
        );
    }

    #[test]
    fn error_chain_lists_causes_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(error_chain(&e), "outer: inner");
        #[derive(Debug, thiserror::Error)]
        #[error("outer: {0}")]
        struct Verbose(#[source] std::io::Error);
        let e = Verbose(std::io::Error::other("inner"));
        assert_eq!(error_chain(&e), "outer: inner");
    }
}
