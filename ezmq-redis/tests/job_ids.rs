//! Job ids and batch pushes against the real Redis at EZMQ_TEST_REDIS_URL:
//! every push returns (and stores) core's id, plain pushes write no
//! message-id key, a batch goes in one pipeline with per-job results.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use ezmq_core::spi::Backend;
use ezmq_core::{ConsumeOptions, Error, Job, JobId, MqClient, PushOptions, Topic};
use ezmq_redis::RedisBackend;
use redis::Value;
use tokio::time::timeout;

const LONG: Duration = Duration::from_secs(15);

async fn raw() -> redis::aio::MultiplexedConnection {
    redis::Client::open(support::redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The message-id keys of `topic`.
async fn msgid_keys(topic: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("ezmq:{{{topic}}}:msgid:*"))
        .query_async(&mut raw().await)
        .await
        .unwrap();
    keys.sort();
    keys
}

/// The `h:ezmq-message-id` field of every entry in `topic`'s stream.
async fn stored_ids(topic: &str) -> Vec<String> {
    let entries: Vec<(String, HashMap<String, Value>)> = redis::cmd("XRANGE")
        .arg(format!("ezmq:{{{topic}}}:s"))
        .arg("-")
        .arg("+")
        .query_async(&mut raw().await)
        .await
        .unwrap();
    entries
        .into_iter()
        .filter_map(|(_, fields)| match fields.get("h:ezmq-message-id") {
            Some(Value::BulkString(id)) => Some(String::from_utf8_lossy(id).into_owned()),
            _ => None,
        })
        .collect()
}

async fn delete_topic_keys(topic: &str) {
    let mut cmd = redis::cmd("DEL");
    cmd.arg(format!("ezmq:{{{topic}}}:s"))
        .arg(format!("ezmq:{{{topic}}}:d"));
    for key in msgid_keys(topic).await {
        cmd.arg(key);
    }
    let _: i64 = cmd.query_async(&mut raw().await).await.unwrap();
}

/// Jobs received until `n` arrived.
async fn take(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Job>, n: usize) -> Vec<Job> {
    let mut got = Vec::new();
    while got.len() < n {
        got.push(timeout(LONG, rx.recv()).await.unwrap().unwrap());
    }
    got
}

#[tokio::test]
async fn immediate_and_delayed_pushes_return_and_store_cores_id_and_write_no_msgid_key() {
    let Some(config) = support::config().await else {
        return;
    };
    let client = support::client(&config).await;
    let topic = support::topic("ids");
    let now = client.push(&topic, "now".into()).await.unwrap();
    let later = client
        .push_with(
            &topic,
            "later".into(),
            PushOptions::new().with_delay(Duration::from_millis(200)),
        )
        .await
        .unwrap();
    for id in [&now, &later] {
        assert!(
            id.created_at().is_some(),
            "{id} is core's UUIDv7, not a stream entry id"
        );
    }
    assert_ne!(now, later);
    assert_eq!(stored_ids(&topic).await, vec![now.to_string()]);
    assert!(
        msgid_keys(&topic).await.is_empty(),
        "a push without a message id writes no message-id key"
    );
    let mut rx = support::forwarded_jobs(&client, &topic, ConsumeOptions::new()).await;
    let got = take(&mut rx, 2).await;
    let ids: HashMap<String, JobId> = got
        .iter()
        .map(|job| (support::body_of(job.clone()), job.id().clone()))
        .collect();
    assert_eq!(ids["now"], now);
    assert_eq!(ids["later"], later, "the delayed job keeps its id");
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    delete_topic_keys(&topic).await;
}

#[tokio::test]
async fn a_batch_stores_immediate_delayed_and_idempotent_jobs_with_their_ids_in_order() {
    let Some(config) = support::config().await else {
        return;
    };
    let client = support::client(&config).await;
    let topic = support::topic("batch-ids");
    let once = format!("once-{}", uuid::Uuid::new_v4().simple());
    let jobs = vec![
        ("a".into(), PushOptions::new()),
        (
            "b".into(),
            PushOptions::new().with_delay(Duration::from_millis(200)),
        ),
        ("c".into(), PushOptions::new().with_message_id(once.clone())),
        ("d".into(), PushOptions::new().with_header("n", "4")),
        (
            "e".into(),
            PushOptions::new().with_delay(Duration::from_millis(100)),
        ),
    ];
    let ids: Vec<JobId> = client
        .push_batch(&topic, jobs)
        .await
        .unwrap()
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ids.len(), 5);
    assert_eq!(ids[2].as_str(), once, "the producer's id is the job id");
    for (n, id) in ids.iter().enumerate() {
        if n != 2 {
            assert!(id.created_at().is_some(), "job {n}: {id} is core's UUIDv7");
        }
    }
    assert_eq!(
        msgid_keys(&topic).await,
        vec![format!("ezmq:{{{topic}}}:msgid:{once}")],
        "only the producer-chosen id has a message-id key"
    );
    // Pushed again by message id: stored once.
    let again = client
        .push_with(
            &topic,
            "c-again".into(),
            PushOptions::new().with_message_id(once.clone()),
        )
        .await
        .unwrap();
    assert_eq!(again.as_str(), once);

    let mut rx = support::forwarded_jobs(&client, &topic, ConsumeOptions::new()).await;
    let got = take(&mut rx, 5).await;
    let by_body: HashMap<String, Job> = got
        .into_iter()
        .map(|job| (support::body_of(job.clone()), job))
        .collect();
    for (n, body) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
        assert_eq!(by_body[body].id(), &ids[n], "{body} has its push's id");
    }
    assert_eq!(by_body["d"].headers().get("n"), Some("4"));
    assert!(
        timeout(Duration::from_millis(500), rx.recv())
            .await
            .is_err(),
        "the repeated message id stored nothing"
    );
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    delete_topic_keys(&topic).await;
}

#[tokio::test]
async fn a_backend_called_without_core_still_gets_cores_ids_and_a_closed_one_refuses_a_batch() {
    let Some(config) = support::config().await else {
        return;
    };
    let backend = RedisBackend::connect(config).await.unwrap();
    let topic = Topic::new(support::topic("unstamped")).unwrap();
    let id = backend
        .publish(&topic, "x".into(), &PushOptions::new())
        .await
        .unwrap();
    assert!(id.created_at().is_some(), "{id} is a UUIDv7");
    let batch = backend
        .publish_batch(
            &topic,
            &[
                ("y".into(), PushOptions::new()),
                (
                    "z".into(),
                    PushOptions::new().with_delay(Duration::from_secs(60)),
                ),
            ],
        )
        .await;
    let batch: Vec<JobId> = batch.into_iter().collect::<Result<_, _>>().unwrap();
    assert!(batch.iter().all(|id| id.created_at().is_some()));
    let mut stored = stored_ids(topic.as_str()).await;
    stored.sort();
    let mut expected = vec![id.to_string(), batch[0].to_string()];
    expected.sort();
    assert_eq!(stored, expected);
    assert!(backend.publish_batch(&topic, &[]).await.is_empty());
    backend.close().await.unwrap();
    let refused = backend
        .publish_batch(&topic, &[("w".into(), PushOptions::new())])
        .await;
    assert!(matches!(refused.as_slice(), [Err(Error::Shutdown)]));
    delete_topic_keys(topic.as_str()).await;
}
