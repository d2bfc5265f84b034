//! Helpers shared by the request-reply integration tests.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use ezmq_core::{Client, ConsumeOptions, ListenerHandle};
use ezmq_request_reply::{Request, RequestReplyExt};
use ezmq_test_support::{init_tracing, TestBroker};

/// A broker and a fresh topic for one test.
pub async fn setup(prefix: &str) -> (TestBroker, String) {
    init_tracing();
    let broker = TestBroker::start().await;
    let topic = broker.unique_topic(prefix);
    (broker, topic)
}

/// A short fetch wait so listeners stop quickly at the end of a test.
pub fn options(concurrency: usize) -> ConsumeOptions {
    ConsumeOptions::new()
        .with_concurrency(concurrency)
        .with_fetch_wait(Duration::from_millis(200))
}

/// A worker whose reply is `<request body>@<name>`.
pub async fn echo_worker(
    client: &Client,
    topic: &str,
    name: &'static str,
    concurrency: usize,
) -> ListenerHandle {
    client
        .add_reply_listener_with(
            topic,
            options(concurrency),
            move |req: Request| async move {
                let mut body = req.body().to_vec();
                body.push(b'@');
                body.extend_from_slice(name.as_bytes());
                Ok::<_, std::io::Error>(body.into())
            },
        )
        .await
        .expect("start the reply listener")
}
