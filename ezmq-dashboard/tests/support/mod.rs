//! What the dashboard's tests share: connecting to a broker (skipped when
//! it does not answer, unless required), requests to the router, and
//! a topic with a waiting job, a `<script>` body and a dead letter.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use ezmq::prelude::*;
use ezmq::{Client, ConsumeOptions, Job, Permanent};
use http_body_util::BodyExt;
use tower::ServiceExt;

/// A client of `url`, or `None` after the skip line.
pub async fn connect(backend: &str, url: &str) -> Option<Client> {
    match tokio::time::timeout(Duration::from_secs(10), ezmq::connect_url(url)).await {
        Ok(Ok(client)) => Some(client),
        Ok(Err(e)) => {
            ezmq_test_support::skip_or_require(backend, url, &e);
            None
        }
        Err(_) => {
            ezmq_test_support::skip_or_require(backend, url, &"no answer within 10 s");
            None
        }
    }
}

/// A client of the embedded test broker (or the real nodes in
/// `EZMQ_TEST_DISQUE_ADDRS`).
pub async fn disque(broker: &ezmq_test_support::TestBroker) -> Client {
    ezmq::connect_url(&format!("disque://{}", broker.addrs().join(",")))
        .await
        .expect("connect")
}

/// A response: status, `Location`, body text.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub location: Option<String>,
    pub text: String,
}

async fn send(app: &Router, request: Request<Body>) -> Reply {
    let response = app
        .clone()
        .oneshot(request)
        .await
        .expect("the router answers");
    let status = response.status();
    let location = response
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes();
    Reply {
        status,
        location,
        text: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// `GET path`.
pub async fn get(app: &Router, path: &str) -> Reply {
    send(
        app,
        Request::get(path).body(Body::empty()).expect("request"),
    )
    .await
}

/// `GET path` with basic auth `user:password`.
pub async fn get_as(app: &Router, path: &str, credential: &str) -> Reply {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(credential);
    let request = Request::get(path)
        .header(header::AUTHORIZATION, format!("Basic {encoded}"))
        .body(Body::empty())
        .expect("request");
    send(app, request).await
}

/// `POST path` with form `fields`.
pub async fn post(app: &Router, path: &str, fields: &[(&str, &str)]) -> Reply {
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    let request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(body.join("&")))
        .expect("request");
    send(app, request).await
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The CSRF token in a page's forms.
pub fn csrf(page: &str) -> String {
    let marker = r#"name="csrf" value=""#;
    let at = page.find(marker).expect("a form with a CSRF token") + marker.len();
    page[at..].split('"').next().expect("the token").to_owned()
}

/// The body XSS tests push.
pub const SCRIPT_BODY: &str = "<script>document.title='pwned'</script>";

/// Fills `topic`: one dead letter (a listener that fails it at once,
/// then stops), then two waiting jobs, one of them [`SCRIPT_BODY`].
pub async fn fill(client: &Client, topic: &str) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let listener = client
        .add_consume_listener_with(
            topic,
            ConsumeOptions::new().with_max_attempts(1),
            move |_job: Job| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(());
                    Err::<(), _>(Permanent::new(std::io::Error::other("card declined")))
                }
            },
        )
        .await
        .expect("listener");
    client.push(topic, "to fail".into()).await.expect("push");
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("the job ran")
        .expect("a run");
    let dead = format!("{topic}.dead-letter");
    let dead_lettered = ezmq_test_support::eventually(Duration::from_secs(30), || async {
        client.queue_len(&dead).await.ok() == Some(1)
            || !client.capabilities().has(ezmq::spi::Capability::QueueStats)
    })
    .await;
    assert!(dead_lettered, "the failed job in {dead}");
    listener.stop(Duration::from_secs(5)).await;
    client.push(topic, "plain".into()).await.expect("push");
    client.push(topic, SCRIPT_BODY.into()).await.expect("push");
}

/// Takes and acks what waits in `topic` (cleanup on shared brokers).
pub async fn drain(client: &Client, topic: &str) {
    let topic = ezmq::Topic::new(topic).expect("topic");
    loop {
        let taken = client
            .admin()
            .take(&topic, 100, Duration::from_millis(300))
            .await
            .expect("take");
        if taken.is_empty() {
            return;
        }
        let handles: Vec<_> = taken.into_iter().map(|d| d.handle).collect();
        client.admin().ack_all(&handles).await.expect("ack");
    }
}

/// The cells of `topic`'s row on the overview (HTML, the link first);
/// empty when it is not there.
pub fn row(page: &str, topic: &str) -> Vec<String> {
    let link = format!(r#"<a href="/topics/{topic}">{topic}</a>"#);
    let Some(start) = page.find(&link) else {
        return Vec::new();
    };
    let rest = &page[start..];
    let row = &rest[..rest.find("</tr>").unwrap_or(rest.len())];
    row.split("</td><td>")
        .map(|cell| cell.trim_end_matches("</td>").to_owned())
        .collect()
}
