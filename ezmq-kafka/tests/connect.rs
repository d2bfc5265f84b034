//! Connecting: a broker that is not there, another server at the port,
//! and the test broker, where a queue's topic is created once.

mod support;

use std::time::Duration;

use ezmq_core::{ConnectFailure, Error, Topic};
use ezmq_kafka::{KafkaCluster, KafkaConfig};
use ezmq_test_support::free_port;
use rdkafka::admin::{AdminOptions, ResourceSpecifier};

#[tokio::test]
async fn nothing_at_the_address_is_a_refused_connection() {
    let url = format!("kafka://127.0.0.1:{}", free_port());
    let err = KafkaCluster::connect(KafkaConfig::new(&url))
        .await
        .expect_err("nothing listens there");
    assert!(err.is_connection_error(), "{err}");
    match &err {
        Error::Connect { failure, addrs, .. } => {
            assert_eq!(*failure, ConnectFailure::Refused, "{err}");
            assert_eq!(addrs, &url);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("connection refused"), "{err}");
}

#[tokio::test]
async fn redis_at_the_port_is_named() {
    let redis = ezmq_test_support::redis_url();
    let port = redis
        .rsplit(':')
        .next()
        .unwrap_or("6379")
        .trim_end_matches('/');
    if std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err() {
        ezmq_test_support::skip_or_require("redis", &redis, &"nothing listens");
        return;
    }
    let err = KafkaCluster::connect(KafkaConfig::new(format!("kafka://127.0.0.1:{port}")))
        .await
        .expect_err("Redis is not Kafka");
    assert!(
        matches!(
            err,
            Error::Connect {
                failure: ConnectFailure::WrongProtocol,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("redis://"), "{err}");
}

#[tokio::test]
async fn a_queues_topic_is_created_once_with_the_configured_partitions() {
    let Some(cluster) = support::cluster().await else {
        return;
    };
    assert!(cluster.broker_count() >= 1);
    let topic = Topic::new("orders.eu").unwrap();
    let name = cluster.queue_topic(&topic).await.expect("created");
    assert_eq!(name, format!("{}.q.orders-2eeu", cluster.config().prefix));
    cluster.queue_topic(&topic).await.expect("known");
    // Another client finds it made: an existing topic is no error.
    let other = KafkaCluster::connect(cluster.config().clone())
        .await
        .expect("a second client");
    assert_eq!(other.queue_topic(&topic).await.expect("exists"), name);

    let admin = support::admin();
    let metadata = admin
        .inner()
        .fetch_metadata(Some(&name), Duration::from_secs(5))
        .expect("metadata");
    let partitions = metadata.topics().first().map(|t| t.partitions().len());
    assert_eq!(partitions, Some(3));
    // What the broker says of the topic's configuration, for the
    // milestone notes (nisshi may not answer DescribeConfigs).
    let described = admin
        .describe_configs(
            [&ResourceSpecifier::Topic(&name)],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(5))),
        )
        .await;
    match described {
        Ok(resources) => {
            let policy = resources
                .into_iter()
                .flatten()
                .flat_map(|resource| resource.entries)
                .find(|entry| entry.name == "cleanup.policy")
                .and_then(|entry| entry.value);
            println!("cleanup.policy of {name}: {policy:?}");
        }
        Err(err) => println!("describe configs of {name}: {err}"),
    }
    support::delete_topics(&[&name]).await;
}
