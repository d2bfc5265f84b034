//! Request-reply (ezmq-request-reply) on the backend's reply inboxes.

use std::time::{Duration, Instant};

use ezmq_core::spi::Capability;
use ezmq_core::{Bytes, Error};
use ezmq_request_reply::{Request, RequestReplyExt};

use crate::support::{assert_unsupported, failure, shutdown, shutdown_all, text};
use crate::Ctx;

/// [`Capability::RequestReply`]: a reply listener on one client answers a
/// request from another within its deadline (the worker sees a deadline
/// in the future); a handler error reaches the caller as [`Error::Remote`] with
/// its message; a request nobody answers fails with [`Error::NoReply`]
/// after its deadline, not before.
pub async fn request_reply(ctx: Ctx) {
    let topic = ctx.topic("rpc");
    if !ctx.has(Capability::RequestReply) {
        let result = ctx
            .client()
            .add_reply_listener(&topic, |req: Request| async move {
                Ok::<Bytes, std::io::Error>(req.into_body())
            })
            .await;
        assert_unsupported(result, Capability::RequestReply, "add_reply_listener");
        let result = ctx
            .client()
            .request(&topic, "x".into(), Duration::from_secs(1))
            .await;
        assert_unsupported(result, Capability::RequestReply, "request");
        ctx.skip_lacking(Capability::RequestReply);
        shutdown(ctx.client(), Duration::from_secs(5)).await;
        return;
    }

    let caller = ctx.client().clone();
    let worker = ctx.connect().await;
    worker
        .add_reply_listener(&topic, |req: Request| async move {
            if req.remaining().is_zero() {
                return Err(failure("request arrived after its deadline"));
            }
            match &req.body()[..] {
                b"fail" => Err(failure("no such account: 42")),
                body => {
                    let reversed: Vec<u8> = body.iter().rev().copied().collect();
                    Ok(Bytes::from(reversed))
                }
            }
        })
        .await
        .expect("add_reply_listener");

    let reply = caller
        .request(&topic, "hello".into(), Duration::from_secs(20))
        .await
        .expect("a reply within the deadline");
    assert_eq!(text(reply.body()), "olleh");

    match caller
        .request(&topic, "fail".into(), Duration::from_secs(20))
        .await
    {
        Err(Error::Remote { message }) => assert!(
            message.contains("no such account: 42"),
            "Error::Remote carries the handler's message: {message:?}"
        ),
        other => panic!("a failing handler must give Error::Remote, got {other:?}"),
    }

    let nobody = ctx.topic("nobody");
    let deadline = Duration::from_secs(1);
    let started = Instant::now();
    let result = caller.request(&nobody, "anyone?".into(), deadline).await;
    let waited = started.elapsed();
    assert!(
        matches!(&result, Err(Error::NoReply { topic: t, .. }) if t.as_str() == nobody.as_str()),
        "no listener: want Error::NoReply naming the topic, got {result:?}"
    );
    assert!(
        waited >= deadline,
        "timed out after {waited:?}, before the {deadline:?} deadline"
    );
    assert!(
        waited < deadline + Duration::from_secs(10),
        "timed out only after {waited:?}"
    );

    shutdown_all(&[&caller, &worker]).await;
}
